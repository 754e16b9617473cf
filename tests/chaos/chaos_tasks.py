"""Handlers of the chaos soak: each execution randomly succeeds, raises, snoozes, fails for
good, sleeps past its lease or kills its own worker process; and handlers that hang past
their timeout.

Each one records its execution (evidence.py) and then reports its outcome whatever became
of its lease: an execution that slept past its lease still returns success, so only the
engine's fence stands between that stale report and the job. To add a job kind, register
another handler here (recording its execution the same way), enqueue it from workload.py,
and give its own invariants to invariants.py.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Callable
from typing import Any

import psycopg

from queue_core import JobContext, PermanentError, RetryAfter, task
from queue_core.errors import HandlerTimedOut
from tests.chaos import evidence
from tests.chaos.limits import (
    BACKOFF,
    CRASH_EXIT_CODE,
    HANG_SECONDS,
    HANG_TIMEOUT_SECONDS,
    LEASE_SECONDS,
    MAX_ATTEMPTS,
)

# Cumulative probabilities of what one execution does.
MIX = (
    (0.010, "exit"),
    (0.040, "sleep_past_lease"),
    (0.070, "snooze"),
    (0.100, "permanent"),
    (0.260, "raise"),
    (1.000, "succeed"),
)


def choose(roll: float) -> str:
    return next(action for limit, action in MIX if roll < limit)


def act(job: JobContext, action: str) -> dict[str, Any]:
    job.progress({"action": action})  # JobCancelled if asked to cancel, LeaseLost if taken
    if action == "exit":
        os._exit(CRASH_EXIT_CODE)
    if action == "sleep_past_lease":
        time.sleep(LEASE_SECONDS * 1.5)  # then reports success all the same
    elif action == "snooze":
        raise RetryAfter(0.2, "chaos snooze")
    elif action == "permanent":
        raise PermanentError("chaos permanent failure")
    elif action == "raise":
        raise RuntimeError("chaos failure")
    return {"n": job.payload.get("n"), "attempt": job.attempt}


def recorded(job: JobContext, run: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """Draw an action, record the execution, `run(action)`, record what it handed back."""
    action = choose(random.random())
    execution = evidence.started(job, action)
    try:
        result = run(action)
    except BaseException as exc:
        evidence.ended(execution, evidence.reported(exc))
        raise
    evidence.ended(execution, "succeeded")
    return result


@task("chaos", max_attempts=MAX_ATTEMPTS, lease_seconds=LEASE_SECONDS, backoff=BACKOFF)
def chaos(job: JobContext) -> dict[str, Any]:
    return recorded(job, lambda action: act(job, action))


@task(
    "chaos-tx",
    transactional=True,
    max_attempts=MAX_ATTEMPTS,
    lease_seconds=LEASE_SECONDS,
    backoff=BACKOFF,
    events=["succeeded"],
)
def chaos_tx(job: JobContext, conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """A transactional handler: its row in chaos.tx_rows, and its `Job Succeeded` event,
    must commit exactly when the job succeeds, whatever the execution does after writing it
    (raise, snooze, die, outlive its lease and report success all the same)."""

    def run(action: str) -> dict[str, Any]:
        conn.execute(
            "insert into chaos.tx_rows (job_id, attempt) values (%s, %s)", (job.id, job.attempt)
        )
        return act(job, action)

    return recorded(job, run)


def mixed_seconds(roll: float) -> float:
    """A mixed job's duration: mostly 1 ms, some of 50-300 ms, a few past its lease (which
    its heartbeats keep), so quick jobs share claims with slow ones."""
    if roll < 0.80:
        return 0.001
    if roll < 0.95:
        return 0.05 + (roll - 0.80) / 0.15 * 0.25
    return LEASE_SECONDS * (0.5 + (roll - 0.95) / 0.05)


@task("chaos-mixed", max_attempts=MAX_ATTEMPTS, lease_seconds=LEASE_SECONDS, backoff=BACKOFF)
def chaos_mixed(job: JobContext) -> dict[str, Any]:
    """A job of mixed duration that only succeeds: its outcome must be saved once, however
    long its batch-mates run (a quick one is never left to lose its lease beside a slow one
    and run again); only a killed worker may make it run twice."""
    execution = evidence.started(job, "mixed")
    ends = time.monotonic() + mixed_seconds(random.random())
    try:
        while (left := ends - time.monotonic()) > 0:
            time.sleep(min(left, 0.2))
            if time.monotonic() < ends:
                job.extend_lease()
    except BaseException as exc:  # a heartbeat refused (lease lost, database away)
        evidence.ended(execution, evidence.reported(exc))
        raise
    evidence.ended(execution, "succeeded")
    return {"n": job.payload.get("n"), "attempt": job.attempt}


# Handlers that hang: half of their executions never end on their own (a socket without a
# timeout, with a heartbeat that would keep the lease for ever), so only the runner's
# timeout frees their job. The plain one is abandoned in its thread, the async one
# cancelled; each records that it was stopped, which no report of its own explains.
HANG_CHANCE = 0.5


def _hang_action() -> str:
    return "hang" if random.random() < HANG_CHANCE else "succeed"


@task("chaos-hang", max_attempts=MAX_ATTEMPTS, backoff=BACKOFF, timeout=HANG_TIMEOUT_SECONDS)
def chaos_hang(job: JobContext) -> dict[str, Any]:
    action = _hang_action()
    execution = evidence.started(job, action)
    ends = time.monotonic() + HANG_SECONDS
    while action == "hang" and time.monotonic() < ends:
        time.sleep(0.1)
        try:
            job.extend_lease()  # a heartbeat: the lease alone never frees a hung job
        except HandlerTimedOut:
            evidence.ended(execution, "timed_out")  # its late return is never read
            return {"late": True}
        except BaseException as exc:  # the database went away: the runner fails the attempt
            evidence.ended(execution, evidence.reported(exc))
            raise
    evidence.ended(execution, "succeeded")
    return {"n": job.payload.get("n"), "attempt": job.attempt}


@task("chaos-hang-async", max_attempts=MAX_ATTEMPTS, backoff=BACKOFF, timeout=HANG_TIMEOUT_SECONDS)
async def chaos_hang_async(job: JobContext) -> dict[str, Any]:
    action = _hang_action()
    execution = evidence.started(job, action)
    ends = time.monotonic() + HANG_SECONDS
    try:
        while action == "hang" and time.monotonic() < ends:
            await asyncio.sleep(0.1)
            job.extend_lease()
    except asyncio.CancelledError:
        evidence.ended(execution, "timed_out")
        raise
    except BaseException as exc:  # the database went away: the runner fails the attempt
        evidence.ended(execution, evidence.reported(exc))
        raise
    evidence.ended(execution, "succeeded")
    return {"n": job.payload.get("n"), "attempt": job.attempt}
