"""Handlers of the durable-steps end-to-end test, imported by `tickq tick` / `tickq invoke`
processes. Every step's fn appends "<job id> <name>" to $TICKQ_STEP_RUNS when it completes,
so the test counts how often each really ran."""

from __future__ import annotations

import os
import time
from typing import Any

from queue_core import JobContext, task

INSTANT = {"base": 0.001, "max": 0.001}


def ran(job: JobContext, name: str, seconds: float = 0.0) -> str:
    time.sleep(seconds)
    with open(os.environ["TICKQ_STEP_RUNS"], "a", encoding="utf-8") as runs:
        runs.write(f"{job.id} {name}\n")
    return name


@task("e2e-six-steps", step_seconds=1, lease_seconds=300)
def six_steps(job: JobContext) -> dict[str, Any]:
    parts = [job.step(f"part:{i}", lambda i=i: ran(job, f"part:{i}", 0.5)) for i in range(6)]
    return {"parts": parts}


@task("e2e-flaky-second", max_attempts=3, backoff=INSTANT)
def flaky_second(job: JobContext) -> list[str]:
    first = job.step("first", lambda: ran(job, "first"))

    def second() -> str:
        if job.attempt == 1:
            ran(job, "second failed")
            raise ConnectionError("the API dropped the connection")
        return ran(job, "second")

    return [first, job.step("second", second)]


@task("e2e-nap")
def nap(job: JobContext) -> str:
    job.sleep("nap", 2)
    return ran(job, "after nap")


@task("e2e-approval")
def approval(job: JobContext) -> Any:
    return job.wait_for("approve")
