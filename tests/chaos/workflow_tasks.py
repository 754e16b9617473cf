"""The handlers of the durable-workflows soak: a saga that maps children and may fail for
good after them, sleep to be cancelled, or kill its worker on every attempt; children
that may crash their worker, and undos that may crash theirs before or after their
effect. Each undo writes its effect to chaos.undo_runs (the test's
evidence, never the engine's), with the lease it ran under."""

from __future__ import annotations

import os
import random
from typing import Any

import psycopg

from queue_core import JobContext, PermanentError, task
from tests.chaos.limits import (
    CRASH_EXIT_CODE,
    LEASE_SECONDS,
    STEP_BACKOFF,
    STEP_MAX_ATTEMPTS,
)
from tests.chaos.limits import (
    WORKFLOW_CHILDREN as CHILDREN,
)
from tests.chaos.limits import (
    WORKFLOW_FAILURE as FAILURE,
)


def undo(job: JobContext, name: str) -> None:
    if random.random() < 0.2:
        os._exit(CRASH_EXIT_CODE)  # dies before its effect: the undo must run again
    with psycopg.connect(os.environ["TICKQ_DATABASE_URL"], autocommit=True) as conn:
        conn.execute(
            "insert into chaos.undo_runs (job_id, name, lease_token, at)"
            " values (%s, %s, %s, clock_timestamp())",
            (job.id, name, job.row.lease_token),
        )
    if random.random() < 0.1:
        os._exit(CRASH_EXIT_CODE)  # dies after its effect, before it was recorded


def effect(name: str) -> str:
    if random.random() < 0.05:
        os._exit(CRASH_EXIT_CODE)
    return name


@task(
    "chaos-wf-saga",
    max_attempts=STEP_MAX_ATTEMPTS,
    lease_seconds=LEASE_SECONDS,
    backoff=STEP_BACKOFF,
)
def saga(job: JobContext) -> dict[str, Any]:
    """Its payload's mode: "ok", "fail" (its last step fails for good), "cancel" (it sleeps
    an hour after its first step, for the test to cancel) or "die" (its worker dies after
    its second step, on every attempt)."""
    mode = job.payload["mode"]
    job.step("a", lambda: effect("a"), undo=lambda _: undo(job, "a"))
    if mode == "cancel":
        job.sleep("until cancelled", 3600)
    payloads = [{"parent": str(job.id), "i": i} for i in range(CHILDREN)]
    kids = job.map("kids", "chaos-wf-child", payloads, max_concurrency=2)
    job.step("b", lambda: effect("b"), undo=lambda _: undo(job, "b"))
    if mode == "die":
        os._exit(CRASH_EXIT_CODE)  # on its last attempt the reclaim makes it compensate
    if mode == "fail":

        def fails() -> None:
            raise PermanentError(FAILURE)

        job.step("c", fails)
    return {"kids": kids}


@task(
    "chaos-wf-child",
    max_attempts=STEP_MAX_ATTEMPTS,
    lease_seconds=LEASE_SECONDS,
    backoff=STEP_BACKOFF,
)
def child(job: JobContext) -> int:
    if random.random() < 0.05:
        os._exit(CRASH_EXIT_CODE)
    return int(job.payload["i"])
