"""`tickq deploy check`: the stored histories of every unfinished durable job (read by the
PostgreSQL adapter, queue_core/postgres/deploys.py) replayed against new code by the
runner's replay (queue_core/runner/replay.py), which has no database of its own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

import psycopg

from queue_core.postgres import deploys
from queue_core.postgres.executor import Executor
from queue_core.runner.replay import DeployCheck, History, check


def deploy_check(conn: psycopg.Connection[Any], tasks: Mapping[str, Any]) -> DeployCheck:
    """Replay the stored histories of every unfinished durable job of `tasks`' types
    against `tasks`' handlers, in one read-only transaction (every read, the parents'
    results the handlers ask for included, sees one snapshot and nothing can be written)."""
    executor = Executor(conn)
    with conn.transaction():
        conn.execute("set transaction read only")
        found = [History(**values) for values in deploys.histories(executor, tasks)]

        def parent_results(job_id: UUID) -> dict[UUID, Any]:
            return deploys.parent_results(executor, job_id)

        return check(tasks, found, parent_results=parent_results)
