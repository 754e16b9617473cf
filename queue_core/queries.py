"""The store's named SQL statements, parsed once from sql/queries.sql, sql/steps.sql
and sql/console.sql (the operator console's) and run as written."""

from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
FILES = ("queries.sql", "steps.sql", "console.sql")


def _load() -> dict[str, str]:
    statements: dict[str, str] = {}
    for file in FILES:
        text = (resources.files("queue_core") / "sql" / file).read_text(encoding="utf-8")
        parts = _NAME.split(text)
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in statements:
                raise ValueError(f"sql/{file} names {name}, which is already named")
            statements[name] = body.strip().rstrip(";")
    return statements


QUERIES: dict[str, str] = _load()
