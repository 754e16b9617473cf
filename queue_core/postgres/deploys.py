"""What `tickq deploy` reads: the stored histories of unfinished durable jobs, for the
replay of queue_core/replay.py, in a read-only transaction (a check must write nothing)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

import psycopg

from ..jobs import JOB_COLUMNS, job_from_row
from ..replay import DeployCheck, History, check
from ..steps import FOREVER, Durable, Wait, WaitKind, frontier
from .executor import Executor


def histories(executor: Executor, types: Iterable[str]) -> list[History]:
    """The unfinished durable jobs of `types`, each with its steps in stored order."""
    rows = executor.rows("job_histories_unfinished", {"types": sorted(set(types))})
    width = len(JOB_COLUMNS)
    found = []
    for row in rows:
        version, stored, patches, kind, name, retrying = row[width:]
        # Where the last run stopped, by the runner's own rule (steps.frontier).
        state = Durable(
            steps={step: result for step, result in stored},
            wait=None if kind is None else Wait(WaitKind(kind), name, FOREVER),
            tries={f"step:{step}": {"tries": 1} for step in retrying},
        )
        found.append(
            History(
                job=job_from_row(row[:width]),
                code_version=version,
                steps=tuple((step, result) for step, result in stored),
                patches=frozenset(patches),
                frontier=tuple(frontier(state)),
            )
        )
    return found


def deploy_check(conn: psycopg.Connection[Any], tasks: Mapping[str, Any]) -> DeployCheck:
    """Replay the stored histories of every unfinished durable job of `tasks`' types
    against `tasks`' handlers, in one read-only transaction (every read, the parents'
    results the handlers ask for included, sees one snapshot and nothing can be written)."""
    executor = Executor(conn)
    with conn.transaction():
        conn.execute("set transaction read only")
        found = histories(executor, tasks)

        def parent_results(job_id: UUID) -> dict[UUID, Any]:
            return dict(executor.rows("job_parent_results", {"id": job_id}))

        return check(tasks, found, parent_results=parent_results)


def unfinished_of_version(conn: psycopg.Connection[Any], version: str) -> dict[str, int]:
    """Unfinished jobs whose last run ran under `version`, by status (empty: drained)."""
    rows = Executor(conn).rows("jobs_unfinished_of_version", {"code_version": version})
    return {status: int(count) for status, count in rows}
