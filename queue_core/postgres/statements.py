"""The store's named SQL statements, parsed once from the .sql files beside the modules that
run them (FILES) and run as written, less their comment lines.

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
FILES = (
    "postgres/claim.sql",
    "postgres/enqueue.sql",
    "postgres/leases.sql",
    "postgres/reads.sql",
    "postgres/transactional.sql",
    "postgres/executor.sql",
    "postgres/probes.sql",
    "postgres/catalog.sql",
    "postgres/deploys.sql",
    "postgres/steps.sql",
    "console/console.sql",
    "policies/outbox.sql",
    "policies/flow_limits.sql",
    "policies/limits.sql",
    "policies/partitions.sql",
    "policies/retention.sql",
    "policies/schedules.sql",
)


def parse(
    text: str,
    file: str = "<text>",
    into: dict[str, str] | None = None,
    parts: dict[str, str] | None = None,
    used: set[str] | None = None,
) -> dict[str, str]:
    """The statements of one .sql file by name, without their whole-line comments, each
    part they name spliced in: the file's own parts, or `parts` (every file's, which
    `_load` gathers first, so a rule statements of several files share is written once).
    The parts spliced are added to `used`."""
    statements = {} if into is None else into
    own = _parts(text, file)
    known = own if parts is None else parts
    spliced: set[str] = set() if used is None else used
    for kind, name, body in _named(text):
        if kind == "part":
            continue
        if name in statements or name in known:
            raise ValueError(f"{file} names {name}, which is already named")
        sql = _COMMENT_LINE.sub("", body).strip().rstrip(";")
        statements[name] = _splice(sql, known, file, (name,), spliced)
    if parts is None and (unused := sorted(set(own) - spliced)):
        raise ValueError(f"{file} names parts no statement splices: {', '.join(unused)}")
    return statements


def _named(text: str) -> list[tuple[str, str, str]]:
    pieces = _NAME.split(text)
    return list(zip(pieces[1::3], pieces[2::3], pieces[3::3], strict=True))


def _parts(text: str, file: str, into: dict[str, str] | None = None) -> dict[str, str]:
    parts = {} if into is None else into
    for kind, name, body in _named(text):
        if kind == "part":
            if name in parts:
                raise ValueError(f"{file} names {name}, which is already named")
            parts[name] = _COMMENT_LINE.sub("", body).strip()
    return parts


def _splice(
    sql: str, parts: dict[str, str], file: str, within: tuple[str, ...], used: set[str]
) -> str:
    def part(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in parts:
            raise ValueError(f"{file}: {within[0]} splices {{{{{name}}}}}, no part")
        if name in within:
            raise ValueError(f"{file}: part {name} splices itself")
        used.add(name)
        return _splice(parts[name], parts, file, (*within, name), used)

    return _SPLICE.sub(part, sql)


def _load() -> dict[str, str]:
    root = resources.files("queue_core")
    texts = {file: (root / file).read_text(encoding="utf-8") for file in FILES}
    parts: dict[str, str] = {}
    for file, text in texts.items():
        _parts(text, f"queue_core/{file}", parts)
    statements: dict[str, str] = {}
    used: set[str] = set()
    for file, text in texts.items():
        parse(text, f"queue_core/{file}", statements, parts, used)
    if unused := sorted(set(parts) - used):
        raise ValueError(f"parts no statement splices: {', '.join(unused)}")
    return statements


QUERIES: dict[str, str] = _load()
