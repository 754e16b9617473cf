"""The job state machine as pure functions. Every function takes `now`; none reads a clock.

The Postgres store performs the same transitions in SQL (queue_core/postgres/*.sql); the
model-based tests hold the two to each other.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from queue_core.errors import InvalidTransition, LeaseLost
from queue_core.model import json_text, payloads, validation
from queue_core.model.jobs import (
    CANCELLABLE,
    ERROR_HISTORY,
    RUNNABLE,
    TERMINAL,
    Job,
    JobSpec,
    Outcome,
    Status,
)

RECLAIM_ERROR = "lease expired"
MAX_ERROR = 4000


def new_job(
    spec: JobSpec,
    *,
    id: UUID,
    now: datetime,
    payload: dict[str, Any] | None = None,
    run_after: datetime | None = None,
    waiting: bool = False,
) -> Job:
    """The row an enqueue inserts. A store passes the payload and run_after the database
    stored (jsonb normalizes the one, the database clock decides the other). `waiting`: some
    parent it was enqueued after has not succeeded yet."""
    run_after = run_after or spec.run_after or now + timedelta(seconds=spec.delay)
    return Job(
        id=id,
        queue=spec.queue,
        type=spec.type,
        user_id=spec.user_id,
        status=Status.WAITING if waiting else Status.QUEUED,
        payload=payloads.decode(spec.payload_json if payload is None else payload),
        idempotency_key=spec.idempotency_key,
        attempts=0,
        max_attempts=spec.max_attempts,
        priority=spec.priority,
        run_after=run_after,
        lease_until=None,
        lease_token=None,
        progress=None,
        result=None,
        error=None,
        errors=[],
        lease_seconds=spec.lease_seconds,
        backoff_base=spec.backoff.base,
        backoff_factor=spec.backoff.factor,
        backoff_max=spec.backoff.max,
        backoff_jitter=spec.backoff.jitter,
        cancel_requested=False,
        created_at=now,
        updated_at=now,
        started_at=None,
        finished_at=None,
        group_key=spec.group_key,
        timeout_seconds=spec.timeout_seconds,
        flow_keys=list(spec.stored_flow_keys),
    )


def is_runnable(job: Job, now: datetime) -> bool:
    return job.status in RUNNABLE and job.run_after <= now


def claim_order(job: Job) -> tuple[int, int, datetime, datetime]:
    """Sort key of the claim: higher priority first, then the owner's own priority, then the
    longest-waiting. The claim statements pick by the same keys (`order by priority desc,
    owner_priority desc, run_after, created_at`), but their rows come back from the lease's
    update in no set order: every claimed batch is put back in this order before it runs, so
    an owner's higher-ranked jobs run before its lower-ranked ones."""
    return (-job.priority, -job.owner_priority, job.run_after, job.created_at)


def claim(job: Job, *, now: datetime, lease_seconds: int, token: UUID) -> Job:
    if not is_runnable(job, now):
        raise InvalidTransition(job.id, job.status, "claim")
    return replace(
        job,
        status=Status.RUNNING,
        attempts=job.attempts + 1,
        lease_until=now + timedelta(seconds=job.lease_seconds or lease_seconds),
        lease_token=token,
        started_at=now,
        updated_at=now,
    )


def lease_token(seed: bytes, job_id: UUID) -> UUID:
    """The token a lease drawn from `seed` gives a job: the first 16 bytes of sha256(seed,
    id), as tickq.jobs_lease derives it, so a seed finds again the jobs its claim leased."""
    return UUID(bytes=hashlib.sha256(seed + job_id.bytes).digest()[:16])


def recovered(job: Job, *, now: datetime, lease_seconds: int) -> Job:
    """A job found again by its claim's seed after the claim's reply was lost: its lease
    renewed, its attempts unchanged (no handler ran it)."""
    if job.status is not Status.RUNNING:
        raise InvalidTransition(job.id, job.status, "recover")
    return replace(
        job,
        lease_until=now + timedelta(seconds=job.lease_seconds or lease_seconds),
        updated_at=now,
    )


# Outcomes: what ends an attempt. The tick runner builds them; `finish` applies them.


def succeeded(job: Job, result: Any = None) -> Outcome:
    """Raises InvalidJob when the result cannot be stored as JSON (NaN, NUL, too large).

    A handler that returns nothing leaves `result_json` None, which stores the same SQL null
    as "null" would, and lets the store send the outcome as two uuids instead of JSON.
    """
    if result is None:
        return Outcome(job.id, _token(job), Status.SUCCEEDED)
    result_json = json_text.json_value(result, "result", validation.MAX_RESULT_BYTES)
    return Outcome(job.id, _token(job), Status.SUCCEEDED, result_json=result_json)


def failed(job: Job, error: str, *, permanent: bool = False, rand: float = 0.0) -> Outcome:
    """Retry with backoff while attempts remain; dead when they are used up or on `permanent`."""
    error = storable_error(error)
    if permanent or job.attempts >= job.max_attempts:
        return Outcome(job.id, _token(job), Status.DEAD, error=error)
    delay = job.backoff.delay(job.attempts, rand)
    return Outcome(job.id, _token(job), Status.RETRYING, error=error, delay=delay)


def unstorable(outcome: Outcome, reason: str) -> Outcome:
    """What ends an attempt whose outcome the database refused to store (a value its
    checks do not take): the job goes dead with the reason, so its batch-mates' outcomes
    and the tick go on without it."""
    return Outcome(
        outcome.job_id,
        outcome.lease_token,
        Status.DEAD,
        error=storable_error(f"its outcome ({outcome.status.value}) could not be stored: {reason}"),
        batch_id=outcome.batch_id,
    )


def snoozed(job: Job, seconds: float) -> Outcome:
    """Run again later without counting an error: the attempt its claim counted is given
    back (max_attempts stays as declared) and counted as a snooze."""
    return Outcome(job.id, _token(job), Status.QUEUED, delay=seconds, extra_attempt=True)


def cancelled_while_running(job: Job) -> Outcome:
    return Outcome(job.id, _token(job), Status.CANCELLED, error="cancelled while running")


def finish(job: Job, outcome: Outcome, *, now: datetime) -> Job:
    """Apply an outcome; refused with LeaseLost unless the job still runs under its token."""
    _check_lease(job, outcome.lease_token)
    waits = outcome.status in RUNNABLE
    return replace(
        job,
        status=outcome.status,
        result=json.loads(outcome.result_json) if outcome.result_json is not None else job.result,
        error=outcome.error if outcome.error is not None else job.error,
        errors=_history(job, outcome.error, now),
        run_after=now + timedelta(seconds=outcome.delay) if waits else job.run_after,
        attempts=job.attempts - (1 if outcome.extra_attempt else 0),
        snoozes=job.snoozes + (1 if outcome.extra_attempt else 0),
        lease_until=None,
        lease_token=None,
        cancel_requested=False,
        updated_at=now,
        finished_at=now if outcome.status in TERMINAL else None,
    )


def reclaim(job: Job, *, now: datetime) -> Job:
    """An expired lease counts as a failed attempt, so a job that kills its worker ends dead."""
    if job.status != Status.RUNNING or job.lease_until is None or job.lease_until > now:
        raise InvalidTransition(job.id, job.status, "reclaim")
    if job.cancel_requested:
        return finish(job, cancelled_while_running(job), now=now)
    return finish(job, failed(job, RECLAIM_ERROR), now=now)


def is_reclaimable(job: Job, now: datetime) -> bool:
    return job.status == Status.RUNNING and job.lease_until is not None and job.lease_until <= now


def extend_lease(job: Job, *, token: UUID, seconds: float, now: datetime) -> Job:
    _check_lease(job, token)
    return replace(job, lease_until=now + timedelta(seconds=seconds), updated_at=now)


def report_progress(job: Job, *, token: UUID, progress: Any, now: datetime) -> Job:
    _check_lease(job, token)
    return replace(job, progress=progress, updated_at=now)


def cancel(job: Job, *, now: datetime) -> Job:
    """Jobs not yet running are cancelled at once; a running one is asked to stop at its next
    heartbeat. Cancelling a job also cancels its waiting descendants (`dependencies.settle`)."""
    if job.status in CANCELLABLE:
        return replace(job, status=Status.CANCELLED, updated_at=now, finished_at=now)
    if job.status == Status.RUNNING:
        return replace(job, cancel_requested=True, updated_at=now)
    raise InvalidTransition(job.id, job.status, "cancel")


def compensating(job: Job) -> bool:
    """What a cancel's answer means when the job is neither cancelled nor asked to stop: a
    saga that runs its undos first, then ends cancelled (workflows.cancel)."""
    return job.status not in TERMINAL and not job.cancel_requested


# Dependencies: what a parent's end does to a waiting child. Which children, and
# when, is decided over the graph by `dependencies.settle`.


def release(job: Job, *, now: datetime) -> Job:
    """A waiting job whose last parent succeeded becomes claimable, keeping its run_after."""
    if job.status != Status.WAITING:
        raise InvalidTransition(job.id, job.status, "release")
    return replace(job, status=Status.QUEUED, updated_at=now)


def cancel_for_parent(job: Job, *, parent: Job, now: datetime) -> Job:
    """A waiting job whose ancestor `parent` ended dead or cancelled can never run."""
    if job.status != Status.WAITING or parent.status not in (Status.DEAD, Status.CANCELLED):
        raise InvalidTransition(job.id, job.status, "cancel for its parent")
    return replace(
        job,
        status=Status.CANCELLED,
        error=parent_failed_error(parent.id, parent.status),
        updated_at=now,
        finished_at=now,
    )


def parent_failed_error(parent_id: UUID, status: Status) -> str:
    """The error of a job cancelled because of a parent (the same text tickq.jobs_settle writes)."""
    return f"parent {parent_id} is {status.value}"


def retry(job: Job, *, now: datetime) -> Job:
    """Send a dead or cancelled job back to the queue with fresh attempts; its errors stay.
    A compensation's raised max_attempts goes back to the declared one: the attempts it
    added were for the undos, not for the runs from scratch a retry gives."""
    if job.status not in (Status.DEAD, Status.CANCELLED):
        raise InvalidTransition(job.id, job.status, "retry")
    return replace(
        job,
        status=Status.QUEUED,
        attempts=0,
        max_attempts=job.shown_max_attempts,
        declared_max_attempts=None,
        compensation_attempts=None,
        run_after=now,
        updated_at=now,
        finished_at=None,
        cancel_requested=False,
    )


def storable_error(error: str) -> str:
    """Error text PostgreSQL accepts: no NUL, valid UTF-8, bounded length."""
    clean = error.replace("\x00", "\\0").encode("utf-8", "replace").decode("utf-8")
    return clean if len(clean) <= MAX_ERROR else clean[: MAX_ERROR - 3] + "..."


def _check_lease(job: Job, token: UUID) -> None:
    if job.status != Status.RUNNING or job.lease_token != token:
        raise LeaseLost(job.id)


def _token(job: Job) -> UUID:
    if job.lease_token is None:
        raise InvalidTransition(job.id, job.status, "finish")
    return job.lease_token


def _history(job: Job, error: str | None, now: datetime) -> list[dict[str, Any]]:
    if error is None:
        return job.errors
    entry = {"attempt": job.attempts, "at": now.isoformat(), "error": error}
    return [*job.errors, entry][-ERROR_HISTORY:]
