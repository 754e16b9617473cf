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


def reported(exc: BaseException) -> str:
    """The outcome the runner makes of a handler's exception (see Runner._judge)."""
    if isinstance(exc, RetryAfter):
        return "snoozed"
    if isinstance(exc, JobCancelled):
        return "cancelled"
    if isinstance(exc, PermanentError):
        return "permanent"
    return "failed"
