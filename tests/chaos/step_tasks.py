"""The handler of the durable-steps soak: a job of several steps, each of which may crash its
worker process, raise, or take a while; every step's fn records a side effect fenced by the
lease token (chaos_tasks.record) just before it returns, and its result names that lease.

Importing chaos_tasks also registers the main soak's handler; the workers load this module.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from queue_core import JobContext, LeaseLost, task
from tests.chaos.chaos_tasks import record
from tests.chaos.limits import CRASH_EXIT_CODE, LEASE_SECONDS

STEP_MAX_ATTEMPTS = 25
STEP_SECONDS = 0.3  # the longest step: 0.15 s of work and a fenced insert


def run_step(job: JobContext, name: str) -> dict[str, Any]:
    roll = random.random()
    if roll < 0.015:
        os._exit(CRASH_EXIT_CODE)  # the worker dies mid-step, before the step is stored
    if roll < 0.045:
        raise RuntimeError(f"chaos failure in {name}")
    time.sleep(random.uniform(0.02, 0.15))
    if not record(job, f"step:{name}"):
        raise LeaseLost(job.id)
    return {"step": name, "lease_token": str(job.row.lease_token)}


@task(
    "chaos-steps",
    max_attempts=STEP_MAX_ATTEMPTS,
    lease_seconds=LEASE_SECONDS,
    step_seconds=STEP_SECONDS,
    backoff={"base": 0.1, "factor": 2, "max": 0.5},
)
def chaos_steps(job: JobContext) -> dict[str, Any]:
    names = [f"s{i}" for i in range(int(job.payload["steps"]))]
    results = [job.step(name, lambda name=name: run_step(job, name)) for name in names]
    if not record(job, "done"):
        raise LeaseLost(job.id)
    return {"steps": results}
