"""The store's named SQL statements, parsed once from sql/queries.sql, sql/steps.sql
and sql/console.sql (the operator console's) and run as written, less their comment lines.

psycopg caches the conversion of a statement's `%(name)s` placeholders only for statements
of at most 4096 characters (MAX_CACHED_STATEMENT_LENGTH); a longer one is re-parsed by a
regular expression on every execution (about 70 µs for the batch statement, whose comments
made it 4990 characters). The comments stay in the .sql files, for readers.
"""

from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
# Whole-line comments only: a "--" after code on a line stays (it could sit in a literal).
_COMMENT_LINE = re.compile(r"^[ \t]*--.*\n", re.MULTILINE)
FILES = ("queries.sql", "steps.sql", "console.sql")


def parse(text: str, file: str = "<text>", into: dict[str, str] | None = None) -> dict[str, str]:
    """The statements of one .sql file by name, without their whole-line comments."""
    statements = {} if into is None else into
    parts = _NAME.split(text)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in statements:
            raise ValueError(f"sql/{file} names {name}, which is already named")
        statements[name] = _COMMENT_LINE.sub("", body).strip().rstrip(";")
    return statements


def _load() -> dict[str, str]:
    statements: dict[str, str] = {}
    for file in FILES:
        text = (resources.files("queue_core") / "sql" / file).read_text(encoding="utf-8")
        parse(text, file, statements)
    return statements


QUERIES: dict[str, str] = _load()
