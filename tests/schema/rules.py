"""The rules migrations and current-state function files keep, checked on their text.

* Every file of queue_core/schema/functions/ holds one statement: the CREATE FUNCTION of the
  tickq function it is named after.
* No migration edits stored function text: none reads a definition back from the catalog
  (pg_get_functiondef, prosrc, prosqlbody) or builds a CREATE FUNCTION in a string to
  execute it. A migration that changes a function says its whole new text.
* The last migration that defines a function defines it exactly as its current-state file
  does (comments and spacing aside), or a later migration drops it.
"""

from __future__ import annotations

import re

from queue_core.migrate import Migration
from tests.schema.sqltext import code, function_code, function_name, statements, tokens

_READS_FUNCTION_TEXT = ("pg_get_functiondef", "prosrc", "prosqlbody")
_BUILT_FUNCTION = re.compile(r"create\s+(or\s+replace\s+)?function", re.IGNORECASE)


def file_problems(files: list[tuple[str, str]]) -> list[str]:
    """What is wrong with the current-state function files, (path, text) each."""
    found: list[str] = []
    for path, text in files:
        if not path.startswith("functions/"):
            continue
        expected = "tickq." + path.removeprefix("functions/").removesuffix(".sql")
        defined = [code(s) for s in statements(text) if code(s)]
        names = [function_name(s) for s in statements(text) if code(s)]
        if len(defined) != 1 or names != [expected]:
            found.append(f"{path} must hold one statement, the CREATE FUNCTION of {expected}")
    return found


def migration_problems(migrations: list[Migration], files: list[tuple[str, str]]) -> list[str]:
    """What breaks the rules in the migrations, given the current-state files."""
    found: list[str] = []
    current = {
        function_name(s): function_code(s)
        for path, text in files
        if path.startswith("functions/")
        for s in statements(text)
        if function_name(s)
    }
    last: dict[str, tuple[str, str]] = {}
    for migration in migrations:
        found += _edits_function_text(migration)
        for statement in statements(migration.sql):
            if name := function_name(statement):
                last[name] = (migration.version, function_code(statement))
            for name in _dropped(statement):
                last.pop(name, None)
    for name, (version, text) in sorted(last.items()):
        if name not in current:
            found.append(f"{version} defines {name}, which has no current-state file")
        elif current[name] != text:
            found.append(
                f"{version} defines {name} otherwise than queue_core/schema/functions/"
                f"{name.removeprefix('tickq.')}.sql: the last migration defining a function"
                " must say what its current-state file says"
            )
    return found


def _edits_function_text(migration: Migration) -> list[str]:
    found: list[str] = []
    for kind, token in tokens(migration.sql):
        if kind == "word" and token.lower().rsplit(".", 1)[-1] in _READS_FUNCTION_TEXT:
            found.append(
                f"{migration.version} reads a function's stored text ({token}): write the"
                " function's whole new definition instead"
            )
        elif kind in ("literal", "escaped") and _BUILT_FUNCTION.search(token):
            found.append(
                f"{migration.version} builds a CREATE FUNCTION in a string: write it as a"
                " statement of its own"
            )
    return found


_DROP = re.compile(r"^drop function (?:if exists )?(.+)$")


def _dropped(statement: str) -> list[str]:
    match = _DROP.match(code(statement))
    if not match:
        return []
    parts = re.split(r",(?![^(]*\))", match[1])
    return [re.sub(r"\(.*", "", part.strip()).split(" ")[0] for part in parts]
