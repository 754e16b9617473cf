"""Handlers of the chaos soak: each attempt randomly succeeds, raises, snoozes, sleeps past
its lease or kills its own worker process.

Every attempt records its side effects in `chaos.effects`, fenced by its lease token: the
row is written only while the job still runs under that token (the job row is share-locked
for the insert, so a reclaim or a finish cannot slip in between the check and the write).
The soak's invariants read these rows to prove that no attempt acted after losing its lease.
"""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any

import psycopg

from queue_core import JobContext, LeaseLost, PermanentError, RetryAfter, task
from tests.chaos.limits import CRASH_EXIT_CODE, LEASE_SECONDS, MAX_ATTEMPTS

# Cumulative probabilities of what one attempt does.
MIX = (
    (0.010, "exit"),
    (0.030, "sleep_past_lease"),
    (0.060, "snooze"),
    (0.090, "permanent"),
    (0.250, "raise"),
    (1.000, "succeed"),
)

FENCED_EFFECT = """
insert into chaos.effects (job_id, lease_token, attempt, kind, pid, at)
select id, lease_token, attempts, %(kind)s, %(pid)s, clock_timestamp()
from tickq.jobs
where id = %(id)s and lease_token = %(token)s and status = 'running'
for share
returning 1
"""

_local = threading.local()


def _connection() -> psycopg.Connection[Any]:
    conn: psycopg.Connection[Any] | None = getattr(_local, "conn", None)
    if conn is None or conn.closed or conn.broken:
        conn = psycopg.connect(os.environ["TICKQ_DATABASE_URL"], autocommit=True, connect_timeout=5)
        _local.conn = conn
    return conn


def record(job: JobContext, kind: str) -> bool:
    """Write a side effect if, and only if, this attempt still holds the job's lease."""
    params = {"id": job.id, "token": job.row.lease_token, "kind": kind, "pid": os.getpid()}
    return _connection().execute(FENCED_EFFECT, params).fetchone() is not None


def choose(roll: float) -> str:
    return next(action for limit, action in MIX if roll < limit)


@task(
    "chaos",
    max_attempts=MAX_ATTEMPTS,
    lease_seconds=LEASE_SECONDS,
    backoff={"base": 0.1, "factor": 2, "max": 1},
)
def chaos(job: JobContext) -> dict[str, Any]:
    if not record(job, "start"):
        raise LeaseLost(job.id)
    job.progress({"started": True})  # raises JobCancelled when someone asked to cancel
    action = choose(random.random())
    if action == "exit":
        os._exit(CRASH_EXIT_CODE)
    if action == "sleep_past_lease":
        time.sleep(LEASE_SECONDS * 1.5)
    elif action == "snooze":
        raise RetryAfter(0.2, "chaos snooze")
    elif action == "permanent":
        raise PermanentError("chaos permanent failure")
    elif action == "raise":
        raise RuntimeError("chaos failure")
    if not record(job, "done"):
        raise LeaseLost(job.id)
    return {"n": job.payload.get("n"), "attempt": job.attempt}
