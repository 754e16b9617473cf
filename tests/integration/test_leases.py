"""Leases: fencing tokens refuse late writers; expired leases are reclaimed as failed attempts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import psycopg
import pytest

from queue_core import JobCancelled, JobContext, LeaseLost, PostgresStore, Status
from queue_core.model import transitions
from queue_core.model.jobs import ERROR_HISTORY
from queue_core.model.validation import job_spec

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LEASE = 30


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def store(conn: psycopg.Connection) -> PostgresStore:
    return PostgresStore(conn)


def test_a_late_worker_cannot_finish_a_job_that_was_reclaimed_and_claimed_again(
    store: PostgresStore,
) -> None:
    store.enqueue(job_spec("t", max_attempts=3), now=at(0))
    (first,) = store.claim(lease_seconds=LEASE, now=at(0))
    (reclaimed,) = store.reclaim(now=at(LEASE))
    (second,) = store.claim(lease_seconds=LEASE, now=reclaimed.run_after)
    before = store.get(first.id)

    held = store.finish([transitions.succeeded(first, "late")], now=at(LEASE + 2))
    with pytest.raises(LeaseLost) as raised:
        store.complete(first, "late", now=at(LEASE + 2))

    assert held == set()
    assert raised.value.job_id == first.id
    assert second.lease_token != first.lease_token
    assert store.get(first.id) == before
    assert before.status == Status.RUNNING and before.attempts == 2


def test_the_current_lease_holder_finishes_normally_after_a_late_writer_was_refused(
    store: PostgresStore,
) -> None:
    store.enqueue(job_spec("t", max_attempts=3), now=at(0))
    (first,) = store.claim(lease_seconds=LEASE, now=at(0))
    (reclaimed,) = store.reclaim(now=at(LEASE))
    (second,) = store.claim(lease_seconds=LEASE, now=reclaimed.run_after)
    with pytest.raises(LeaseLost):
        store.fail(first, "late failure", now=at(LEASE + 2))

    store.complete(second, {"ok": True}, now=at(LEASE + 3))

    job = store.get(second.id)
    assert (job.status, job.result, job.attempts) == (Status.SUCCEEDED, {"ok": True}, 2)
    assert [e["error"] for e in job.errors] == ["lease expired"]


def test_a_job_cannot_be_finished_twice(store: PostgresStore) -> None:
    store.enqueue(job_spec("t"), now=at(0))
    (job,) = store.claim(now=at(0))
    store.complete(job, 1, now=at(1))

    with pytest.raises(LeaseLost):
        store.fail(job, "second write", now=at(2))

    assert store.get(job.id).status == Status.SUCCEEDED


def test_an_unexpired_lease_is_not_reclaimed(store: PostgresStore) -> None:
    store.enqueue(job_spec("t"), now=at(0))
    (job,) = store.claim(lease_seconds=LEASE, now=at(0))

    assert store.reclaim(now=at(LEASE - 1)) == []
    assert store.get(job.id).lease_token == job.lease_token


def test_an_expired_lease_with_attempts_left_goes_back_to_retrying_with_backoff(
    store: PostgresStore,
) -> None:
    store.enqueue(job_spec("t", max_attempts=3), now=at(0))
    store.claim(lease_seconds=LEASE, now=at(0))

    (job,) = store.reclaim(now=at(LEASE + 5))

    assert job.status == Status.RETRYING
    assert job.run_after == at(LEASE + 5 + job.backoff.delay(1))
    assert job.error == "lease expired"
    assert job.lease_token is None and job.lease_until is None
    assert job.finished_at is None


def test_an_expired_lease_on_the_last_attempt_makes_the_job_dead(store: PostgresStore) -> None:
    store.enqueue(job_spec("t", max_attempts=1), now=at(0))
    store.claim(lease_seconds=LEASE, now=at(0))

    (job,) = store.reclaim(now=at(LEASE))

    assert job.status == Status.DEAD
    assert job.error == "lease expired"
    assert job.finished_at == at(LEASE)


def test_a_job_that_keeps_killing_its_worker_ends_dead_after_max_attempts(
    store: PostgresStore,
) -> None:
    store.enqueue(job_spec("t", max_attempts=3), now=at(0))
    now = at(0)
    statuses = []
    for _ in range(3):
        (job,) = store.claim(lease_seconds=LEASE, now=now)
        now = job.lease_until
        (job,) = store.reclaim(now=now)
        statuses.append(job.status)
        now = job.run_after

    assert statuses == [Status.RETRYING, Status.RETRYING, Status.DEAD]
    assert store.claim(now=at(10_000)) == []
    assert store.get(job.id).attempts == 3


def test_reclaiming_a_job_asked_to_cancel_ends_it_cancelled(store: PostgresStore) -> None:
    store.enqueue(job_spec("t", max_attempts=3), now=at(0))
    (job,) = store.claim(lease_seconds=LEASE, now=at(0))
    store.cancel(job.id, now=at(1))

    (after,) = store.reclaim(now=at(LEASE))

    assert after.status == Status.CANCELLED
    assert after.error == "cancelled while running"


def test_the_error_history_keeps_the_last_twenty_failures(store: PostgresStore) -> None:
    store.enqueue(job_spec("t", max_attempts=25, backoff_policy={"base": 1, "max": 1}), now=at(0))
    now = at(0)
    for attempt in range(1, 26):
        (job,) = store.claim(now=now)
        store.fail(job, f"failure {attempt}", now=now)
        now += timedelta(seconds=1)

    job = store.get(job.id)
    assert job.status == Status.DEAD
    assert len(job.errors) == ERROR_HISTORY
    assert [e["error"] for e in job.errors] == [f"failure {n}" for n in range(6, 26)]
    assert [e["attempt"] for e in job.errors] == list(range(6, 26))
    assert job.error == "failure 25"


def test_a_failure_with_attempts_left_retries_after_the_jobs_backoff(
    store: PostgresStore,
) -> None:
    store.enqueue(
        job_spec("t", max_attempts=5, backoff_policy={"base": 10, "factor": 3}), now=at(0)
    )
    for attempt in (1, 2):
        (job,) = store.claim(now=at(1000 * attempt))
        store.fail(job, "boom", now=at(1000 * attempt))

    job = store.get(job.id)
    assert job.status == Status.RETRYING
    assert job.run_after == at(2000 + 30)


def test_a_permanent_failure_is_dead_at_once(store: PostgresStore) -> None:
    store.enqueue(job_spec("t", max_attempts=5), now=at(0))
    (job,) = store.claim(now=at(0))

    store.fail(job, "bad input", permanent=True, now=at(1))

    after = store.get(job.id)
    assert (after.status, after.attempts, after.error) == (Status.DEAD, 1, "bad input")


def test_extend_lease_and_progress_need_the_current_token(store: PostgresStore) -> None:
    store.enqueue(job_spec("t"), now=at(0))
    (job,) = store.claim(lease_seconds=LEASE, now=at(0))
    assert job.lease_token is not None

    state = store.extend_lease(job.id, job.lease_token, 300, now=at(10))
    cancel_asked = store.report_progress(job.id, job.lease_token, {"pct": 50}, now=at(11))
    with pytest.raises(LeaseLost):
        store.extend_lease(job.id, uuid4(), 300, now=at(12))
    with pytest.raises(LeaseLost):
        store.report_progress(job.id, uuid4(), {"pct": 99}, now=at(12))

    after = store.get(job.id)
    assert (state.lease_until, state.cancel_requested, cancel_asked) == (at(310), False, False)
    assert (after.lease_until, after.progress) == (at(310), {"pct": 50})


def test_an_extended_lease_is_not_reclaimed_at_the_original_deadline(
    store: PostgresStore,
) -> None:
    store.enqueue(job_spec("t"), now=at(0))
    (job,) = store.claim(lease_seconds=LEASE, now=at(0))
    assert job.lease_token is not None
    store.extend_lease(job.id, job.lease_token, 120, now=at(20))

    assert store.reclaim(now=at(LEASE)) == []
    assert [j.id for j in store.reclaim(now=at(140))] == [job.id]


def test_a_heartbeat_after_a_cancel_request_raises_job_cancelled_and_keeps_the_lease(
    store: PostgresStore,
) -> None:
    store.enqueue(job_spec("t"))
    (job,) = store.claim(lease_seconds=LEASE)
    context = JobContext(job, store, LEASE)
    context.extend_lease()  # nobody asked yet: the lease is pushed out, nothing raised
    store.cancel(job.id)

    with pytest.raises(JobCancelled):
        context.extend_lease(5)

    after = store.get(job.id)
    assert after.status == Status.RUNNING and after.cancel_requested
    assert after.lease_token == job.lease_token
