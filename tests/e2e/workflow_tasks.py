"""Handlers of the durable-workflows end-to-end test, imported by `tickq tick` processes.
Every effect appends "<job id> <what>" to $TICKQ_STEP_RUNS, so the test counts how often
each really ran; a child also notes how many of its siblings were runnable when it started."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import psycopg

from queue_core import JobContext, PermanentError, Retry, task

INSTANT = {"base": 0.001, "max": 0.001}


def ran(job: JobContext, what: str) -> str:
    with open(os.environ["TICKQ_STEP_RUNS"], "a", encoding="utf-8") as runs:
        runs.write(f"{job.id} {what}\n")
    return what


@task("wf-fan-out", lease_seconds=30)
def fan_out(job: JobContext) -> dict[str, Any]:
    payloads = [{"i": i} for i in range(job.payload["n"])]
    results = job.map("chunks", "wf-chunk", payloads, max_concurrency=job.payload["window"])
    ran(job, "resumed with results")
    return {"results": results}


@task("wf-chunk", lease_seconds=30, backoff=INSTANT)
def chunk(job: JobContext) -> int:
    """Notes how many children of its parent's step are runnable (queued, running,
    retrying) as it starts, itself included."""
    with psycopg.connect(os.environ["TICKQ_DATABASE_URL"]) as conn:
        (runnable,) = conn.execute(
            "select count(*) from tickq.job_children k join tickq.jobs c on c.id = k.child_id"
            " where k.parent_id = (select parent_id from tickq.job_children where child_id = %s)"
            " and c.status in ('queued', 'running', 'retrying')",
            (job.id,),
        ).fetchone() or (0,)
    ran(job, f"runnable {runnable}")
    return int(job.payload["i"]) * 2


@task("wf-saga", lease_seconds=2, max_attempts=2, backoff=INSTANT)
def saga(job: JobContext) -> None:
    job.step("charge", lambda: ran(job, "charge"), undo=lambda _: refund(job))
    job.step("reserve", lambda: ran(job, "reserve"), undo=lambda _: ran(job, "undo reserve"))

    def ship() -> None:
        ran(job, "ship failed")
        raise PermanentError("the carrier refused the parcel")

    job.step("ship", ship, undo=lambda _: ran(job, "undo ship"))


def refund(job: JobContext) -> str:
    """The first try dies with its process (SIGKILL) before refunding: the next tick goes on
    with the compensation where it stopped."""
    marker = Path(os.environ["TICKQ_STEP_RUNS"] + ".killed")
    if not marker.exists():
        marker.write_text("killed during the refund")
        os.kill(os.getpid(), signal.SIGKILL)
    return ran(job, "undo charge")


@task("wf-flaky-step", max_attempts=1)
def flaky_step(job: JobContext) -> str:
    def call() -> str:
        path = Path(os.environ["TICKQ_STEP_RUNS"])
        failed = path.read_text().count(f"{job.id} call failed") if path.exists() else 0
        if failed < 2:
            ran(job, "call failed")
            raise ConnectionError("the API dropped the connection")
        return ran(job, "call")

    return str(job.step("call", call, retry=Retry(3, base=0.05, max=0.05)))
