"""How a soak handler records its own execution in chaos.executions, unfenced.

The record is the handler's word, not the engine's: it says which lease token and attempt
the handler was given and what it handed back, whether or not its lease still holds, so the
invariants can judge the engine's fence instead of one the test applied. When the record
cannot be written (the database restarting, say), the process exits at once: an execution
without its record could be accepted by the engine and look like a lease the engine ended
on its own, so it must never report anything.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import psycopg

from queue_core import JobCancelled, JobContext, PermanentError, RetryAfter
from queue_core.runner.durable_context import Suspended
from tests.chaos.limits import EVIDENCE_LOST_EXIT_CODE

START = """
insert into chaos.executions (job_id, lease_token, attempt, action, pid, started_at)
values (%(id)s, %(token)s, %(attempt)s, %(action)s, %(pid)s, clock_timestamp())
returning id
"""

END = """
update chaos.executions set reported = %(reported)s, ended_at = clock_timestamp()
where id = %(execution)s
"""

# While set, the handler has handed control to `job.step` and no step fn is running: the
# engine may suspend the job on the handler's behalf. A suspension is stored in the
# handler's own call before the handler hears of it, so this mark, written first, is what
# explains it (and explains it still when the process dies before reporting `suspended`).
BETWEEN_STEPS = """
update chaos.executions
set between_steps_at = case when %(between)s then clock_timestamp() end
where id = %(execution)s
"""

STEP_COMPLETED = """
insert into chaos.step_runs (job_id, name, lease_token, attempt, completed_at)
values (%(id)s, %(name)s, %(token)s, %(attempt)s, clock_timestamp())
"""

_local = threading.local()


def _connection() -> psycopg.Connection[Any]:
    conn: psycopg.Connection[Any] | None = getattr(_local, "conn", None)
    if conn is None or conn.closed or conn.broken:
        conn = psycopg.connect(os.environ["TICKQ_DATABASE_URL"], autocommit=True, connect_timeout=5)
        _local.conn = conn
    return conn


def _write(query: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    for _ in range(2):  # a connection broken by a database restart gets one fresh try
        try:
            cursor = _connection().execute(query, params)
            return cursor.fetchone() if cursor.description else None
        except psycopg.Error:
            _local.conn = None
    os._exit(EVIDENCE_LOST_EXIT_CODE)


def started(job: JobContext, action: str) -> int:
    """Record that this execution began, under the lease it was given; returns its id."""
    assert job.row.lease_token is not None
    row = _write(
        START,
        {
            "id": job.id,
            "token": job.row.lease_token,
            "attempt": job.attempt,
            "action": action,
            "pid": os.getpid(),
        },
    )
    assert row is not None
    return int(row[0])


def ended(execution: int, reported: str) -> None:
    """Record the outcome this execution is about to hand to the runner."""
    _write(END, {"execution": execution, "reported": reported})


def between_steps(execution: int, between: bool) -> None:
    """Mark (or clear) the stretch where the engine may suspend this execution."""
    _write(BETWEEN_STEPS, {"execution": execution, "between": between})


def step_completed(job: JobContext, name: str) -> None:
    """Record that a step's fn completed under this lease, whether or not it gets stored."""
    assert job.row.lease_token is not None
    _write(
        STEP_COMPLETED,
        {"id": job.id, "name": name, "token": job.row.lease_token, "attempt": job.attempt},
    )


def reported(exc: BaseException) -> str:
    """The outcome the runner makes of a handler's exception (see Runner._judge); a
    suspension was stored before it unwound the handler, and gives its attempt back."""
    if isinstance(exc, Suspended):
        return "suspended"
    if isinstance(exc, RetryAfter):
        return "snoozed"
    if isinstance(exc, JobCancelled):
        return "cancelled"
    if isinstance(exc, PermanentError):
        return "permanent"
    return "failed"
