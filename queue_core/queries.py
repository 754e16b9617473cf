"""The store's named SQL statements, parsed once from sql/queries.sql, sql/steps.sql
and sql/console.sql (the operator console's) and run as written, less their comment lines.

A file may also name parts ("-- part: <name>"): text that statements of that file splice in
where they say {{name}}, so a rule several statements share (the finish and the pick of
the claim statements) is written once; a part is no statement of its own.

psycopg caches the conversion of a statement's `%(name)s` placeholders only for statements
of at most 4096 characters (MAX_CACHED_STATEMENT_LENGTH); a longer one is re-parsed by a
regular expression on every execution (about 70 µs for the batch statement, whose comments
made it 4990 characters). The comments stay in the .sql files, for readers.
"""

from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"^-- (name|part): (\w+)\s*$", re.MULTILINE)
_SPLICE = re.compile(r"\{\{(\w+)\}\}")
# Whole-line comments only: a "--" after code on a line stays (it could sit in a literal).
_COMMENT_LINE = re.compile(r"^[ \t]*--.*\n", re.MULTILINE)
FILES = ("queries.sql", "steps.sql", "console.sql", "outbox.sql")


def parse(text: str, file: str = "<text>", into: dict[str, str] | None = None) -> dict[str, str]:
    """The statements of one .sql file by name, without their whole-line comments, each
    part they name spliced in."""
    statements = {} if into is None else into
    parts: dict[str, str] = {}
    pieces = _NAME.split(text)
    named = list(zip(pieces[1::3], pieces[2::3], pieces[3::3], strict=True))
    for kind, name, body in named:
        found = parts if kind == "part" else statements
        if name in parts or name in statements:
            raise ValueError(f"sql/{file} names {name}, which is already named")
        found[name] = _COMMENT_LINE.sub("", body).strip()
        if kind == "name":
            found[name] = found[name].rstrip(";")
    used: set[str] = set()

    def splice(sql: str, within: tuple[str, ...]) -> str:
        def part(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in parts:
                raise ValueError(f"sql/{file}: {within[0]} splices {{{{{name}}}}}, no part")
            if name in within:
                raise ValueError(f"sql/{file}: part {name} splices itself")
            used.add(name)
            return splice(parts[name], (*within, name))

        return _SPLICE.sub(part, sql)

    for name in [name for kind, name, _ in named if kind == "name"]:
        statements[name] = splice(statements[name], (name,))
    if unused := sorted(set(parts) - used):
        raise ValueError(f"sql/{file} names parts no statement splices: {', '.join(unused)}")
    return statements


def _load() -> dict[str, str]:
    statements: dict[str, str] = {}
    for file in FILES:
        text = (resources.files("queue_core") / "sql" / file).read_text(encoding="utf-8")
        parse(text, file, statements)
    return statements


QUERIES: dict[str, str] = _load()
