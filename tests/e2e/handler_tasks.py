"""Handlers for the handler-semantics runs in separate processes: a transactional charge
that can hold its transaction open until the test says go (or kills it), a slow job that
keeps its worker alive after a commit, and a batch handler that logs each call's jobs.

The test and the processes meet in the folder TICKQ_HANDLER_MARKS: `<job id>.inside` says
a handler got there, `<job id>.go` lets a held one return."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import psycopg

from queue_core import HandlerBatch, JobContext, task

HOLD_SECONDS = 120  # longer than any test waits: the test kills or releases it first


def marks() -> Path:
    return Path(os.environ["TICKQ_HANDLER_MARKS"])


def hold(job: JobContext) -> None:
    """Say the handler got here, then wait until released (or killed)."""
    (marks() / f"{job.id}.inside").touch()
    ends = time.monotonic() + HOLD_SECONDS
    while not (marks() / f"{job.id}.go").exists() and time.monotonic() < ends:
        time.sleep(0.02)


@task("e2e-charge", transactional=True)
def charge(job: JobContext, conn: psycopg.Connection[Any]) -> dict[str, int]:
    conn.execute("insert into public.charges values (%s, %s)", (job.id, job.attempt))
    if job.attempt == 1 and job.payload.get("hold"):
        hold(job)
    return {"attempt": job.attempt}


@task("e2e-slow")
def slow(job: JobContext) -> None:
    if job.attempt == 1:
        hold(job)


@task("e2e-embed", batch_size=50)
def embed(batch: HandlerBatch) -> list[dict[str, int]]:
    with open(marks() / "calls.jsonl", "a") as log:
        log.write(json.dumps([job.payload["n"] for job in batch.jobs]) + "\n")
    for job in batch.jobs:
        if job.payload["n"] == 77 and job.attempt == 1:
            batch.fail(job, RuntimeError("document 77 refused"))
    return [{"doubled": job.payload["n"] * 2} for job in batch.jobs]
