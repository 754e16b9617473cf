"""What `tickq deploy` reads: the stored histories of unfinished durable jobs, for the
replay of queue_core/runner/replay.py, in a read-only transaction (a check must write nothing)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import UUID

import psycopg

from queue_core.model.jobs import JOB_COLUMNS, job_from_row
from queue_core.model.steps import FOREVER, Durable, Wait, WaitKind, frontier
from queue_core.postgres.executor import Executor


def histories(executor: Executor, types: Iterable[str]) -> list[dict[str, Any]]:
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
            {
                "job": job_from_row(row[:width]),
                "code_version": version,
                "steps": tuple((step, result) for step, result in stored),
                "patches": frozenset(patches),
                "frontier": tuple(frontier(state)),
            }
        )
    return found


def parent_results(executor: Executor, job_id: UUID) -> dict[UUID, Any]:
    """The results of a job's parents, as its handler reads them."""
    return dict(executor.rows("job_parent_results", {"id": job_id}))


def unfinished_of_version(conn: psycopg.Connection[Any], version: str) -> dict[str, int]:
    """Unfinished jobs whose last run ran under `version`, by status (empty: drained)."""
    rows = Executor(conn).rows("jobs_unfinished_of_version", {"code_version": version})
    return {status: int(count) for status, count in rows}
