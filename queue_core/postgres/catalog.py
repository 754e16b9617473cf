"""The task catalogue's table (queue_core/model/catalog.py says what it is for): publishing a
registry's tasks, and reading the catalogue back for `tickq tasks`."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from queue_core.model.catalog import Tasks, code_version, defaults_of, settings_of
from queue_core.postgres.executor import Executor


def publish(conn: psycopg.Connection[Any], registry: Tasks) -> list[str]:
    """Publish the registry's tasks to the catalogue; returns the types published."""
    tasks = [registry.tasks[name] for name in registry.names()]
    if not tasks:
        return []
    params = {
        "types": [task.name for task in tasks],
        "defaults": [json.dumps(defaults_of(task)) for task in tasks],
        "settings": [json.dumps(settings_of(task)) for task in tasks],
        "code_version": code_version(registry),
    }
    return [row[0] for row in Executor(conn).rows("task_catalog_publish", params)]


def entries(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    """The catalogue, by type: defaults, settings, code version, when published."""
    return Executor(conn).dicts("task_catalog_list", {})
