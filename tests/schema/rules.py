"""The rules migrations and function files keep, checked on their text.

* Every file of queue_core/schema/functions/ holds the CREATE OR REPLACE FUNCTION of the
  tickq function it is named after (the migrator applies it again whenever its text changes,
  so it must replace what is there), then only who may run that function: REVOKE and GRANT
  statements on it.
* A function's text is in its file alone: no migration creates a function, reads a
  definition back from the catalog (pg_get_functiondef, prosrc, prosqlbody) or builds a
  CREATE FUNCTION in a string to execute it. Migrations hold tables, data, grants and drops.
"""

from __future__ import annotations

import re

from queue_core.migrate import Migration
from tests.schema.sqltext import code, function_name, statements, tokens

_READS_FUNCTION_TEXT = ("pg_get_functiondef", "prosrc", "prosqlbody")
_BUILT_FUNCTION = re.compile(r"create\s+(or\s+replace\s+)?function", re.IGNORECASE)
_CREATES_FUNCTION = re.compile(r"^create (?:or replace )?function ")
_GRANT = re.compile(r"^(?:revoke|grant) \w+ on function (tickq\.\w+)\(")


def file_problems(files: list[tuple[str, str]]) -> list[str]:
    """What is wrong with the current-state function files, (path, text) each."""
    found: list[str] = []
    for path, text in files:
        if not path.startswith("functions/"):
            continue
        expected = "tickq." + path.removeprefix("functions/").removesuffix(".sql")
        defined = [code(s) for s in statements(text) if code(s)]
        names = [function_name(s) for s in statements(text) if code(s)]
        if (
            not defined
            or names[0] != expected
            or any(
                not _GRANT.match(other) or _GRANT.match(other)[1] != expected
                for other in defined[1:]
            )
        ):
            found.append(
                f"{path} must hold the CREATE FUNCTION of {expected}, then only REVOKE and"
                " GRANT on it"
            )
        elif not defined[0].startswith("create or replace function "):
            found.append(
                f"{path} must say CREATE OR REPLACE FUNCTION: the migrator applies it again"
                " when its text changes"
            )
    return found


def migration_problems(migrations: list[Migration]) -> list[str]:
    """What breaks the rules in the migrations."""
    found: list[str] = []
    for migration in migrations:
        found += _edits_function_text(migration)
        for statement in statements(migration.sql):
            if _CREATES_FUNCTION.match(code(statement)):
                name = function_name(statement) or "a function"
                found.append(
                    f"{migration.version} creates {name}: a function's text lives in"
                    " queue_core/schema/functions/ alone, which the migrator applies again"
                    " when it changes"
                )
    return found


def _edits_function_text(migration: Migration) -> list[str]:
    found: list[str] = []
    for kind, token in tokens(migration.sql):
        if kind == "word" and token.lower().rsplit(".", 1)[-1] in _READS_FUNCTION_TEXT:
            found.append(
                f"{migration.version} reads a function's stored text ({token}): write the"
                " function's whole new definition in its file instead"
            )
        elif kind in ("literal", "escaped") and _BUILT_FUNCTION.search(token):
            found.append(
                f"{migration.version} builds a CREATE FUNCTION in a string: write the function"
                " in its file instead"
            )
    return found
