"""SQL text as the schema tests read it: split into statements, compared without comments.

Two function definitions are the same when they differ only in comments, spacing, the case
of words outside quotes and the tags of their dollar quotes: what PostgreSQL runs is then
the same. Literals, quoted identifiers and the order of words are compared as written.
"""

from __future__ import annotations

import re

# One token at a time: comments, quoted text, dollar-quote tags, words, anything else.
_TOKEN = re.compile(
    r"""(?P<line_comment>--[^\n]*)
      | (?P<block_comment>/\*)
      | (?P<escaped>[Ee]'(?:[^'\\]|\\.|'')*')
      | (?P<literal>'(?:[^']|'')*')
      | (?P<identifier>"(?:[^"]|"")*")
      | (?P<dollar>\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$)
      | (?P<word>[A-Za-z0-9_$.]+)
      | (?P<space>\s+)
      | (?P<other>.)""",
    re.VERBOSE | re.DOTALL,
)
_WORDLIKE = re.compile(r"[A-Za-z0-9_$'\"]")


def _block_comment_end(text: str, start: int) -> int:
    """Where the block comment opened at `start` ends (they nest in PostgreSQL)."""
    depth, i = 0, start
    while i < len(text):
        if text.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif text.startswith("*/", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    raise ValueError(f"unterminated block comment at offset {start}")


def tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) of every token, comments included; kinds as in _TOKEN's groups."""
    found: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        match = _TOKEN.match(text, i)
        assert match is not None and match.lastgroup is not None  # "other" matches anything
        if match.lastgroup == "block_comment":
            end = _block_comment_end(text, i)
            found.append(("block_comment", text[i:end]))
            i = end
            continue
        found.append((match.lastgroup, match.group()))
        i = match.end()
    return found


def normalized(text: str) -> str:
    """The text without comments, spaces only between two words, words outside quotes in
    lower case, every dollar-quote tag as $$."""
    out: list[str] = []
    space = False
    for kind, token in tokens(text):
        if kind in ("line_comment", "block_comment", "space"):
            space = True
            continue
        token = {"word": token.lower(), "other": token, "dollar": "$$"}.get(kind, token)
        if space and out and _WORDLIKE.match(out[-1][-1]) and _WORDLIKE.match(token[0]):
            out.append(" ")
        out.append(token)
        space = False
    return "".join(out)


def statements(text: str) -> list[str]:
    """The statements of a script, split at the semicolons outside quotes and dollar quotes,
    each with the comments before it and inside it."""
    found: list[str] = []
    current: list[str] = []
    quote: str | None = None  # the dollar-quote tag we are inside
    for kind, token in tokens(text):
        current.append(token)
        if kind == "dollar":
            quote = None if quote == token else (quote or token)
        elif kind == "other" and token == ";" and quote is None:
            found.append("".join(current).strip())
            current = []
    if "".join(current).strip():
        found.append("".join(current).strip())
    return found


def code(statement: str) -> str:
    """A statement without its comments, normalized (empty when it is only comments)."""
    return normalized(statement).rstrip(";")


_FUNCTION = re.compile(r"^create (?:or replace )?function (tickq\.[a-z0-9_]+)\(")


def function_name(statement: str) -> str | None:
    """The tickq function a CREATE [OR REPLACE] FUNCTION statement defines, else None."""
    match = _FUNCTION.match(code(statement))
    return match.group(1) if match else None


def function_code(statement: str) -> str:
    """A function definition as compared: normalized, whether it says OR REPLACE or not."""
    return re.sub(r"^create (?:or replace )?function ", "create function ", code(statement))
