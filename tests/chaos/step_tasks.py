"""The handler of the durable-steps soak: a job of several steps, each of which may crash its
worker process, raise, outlive its lease, or take a while.

It records its execution like the main soak's handler (evidence.py), with the outcome
`suspended` when the engine suspended it, and marks each stretch inside `job.step` where no
fn runs (where the engine may suspend it). Every step's fn records its own completion in
chaos.step_runs just before it returns, and its result names the lease it ran under, so the
invariants can tell which fn completion a stored step came from.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from queue_core import JobContext, task
from tests.chaos import evidence
from tests.chaos.limits import CRASH_EXIT_CODE, LEASE_SECONDS, STEP_BACKOFF, STEP_MAX_ATTEMPTS

STEP_SECONDS = 0.3  # the longest step but one: 0.15 s of work and two evidence writes


def run_step(job: JobContext, name: str) -> dict[str, Any]:
    roll = random.random()
    if roll < 0.015:
        os._exit(CRASH_EXIT_CODE)  # the worker dies mid-step, before the step is stored
    if roll < 0.045:
        raise RuntimeError(f"chaos failure in {name}")
    if roll < 0.055:
        # Outlives its lease (longer than step_seconds promised): another attempt takes the
        # job, and this fn's completion must not be stored.
        time.sleep(LEASE_SECONDS * 1.5)
    else:
        time.sleep(random.uniform(0.02, 0.15))
    evidence.step_completed(job, name)
    return {"step": name, "lease_token": str(job.row.lease_token)}


def durable_step(job: JobContext, execution: int, name: str) -> Any:
    ran = False

    def fn() -> dict[str, Any]:
        nonlocal ran
        ran = True
        evidence.between_steps(execution, False)
        return run_step(job, name)

    evidence.between_steps(execution, True)
    result = job.step(name, fn)
    if not ran:  # returned from storage: no fn ran, the handler goes on
        evidence.between_steps(execution, False)
    return result


@task(
    "chaos-steps",
    max_attempts=STEP_MAX_ATTEMPTS,
    lease_seconds=LEASE_SECONDS,
    step_seconds=STEP_SECONDS,
    backoff=STEP_BACKOFF,
)
def chaos_steps(job: JobContext) -> dict[str, Any]:
    execution = evidence.started(job, "steps")
    try:
        names = [f"s{i:02d}" for i in range(int(job.payload["steps"]))]  # sort as run
        results = [durable_step(job, execution, name) for name in names]
    except BaseException as exc:
        evidence.ended(execution, evidence.reported(exc))
        raise
    evidence.ended(execution, "succeeded")
    return {"steps": results}
