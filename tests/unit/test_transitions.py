"""The pure job state machine: each transition, its fencing and its refusals."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import pytest

from queue_core.errors import InvalidTransition, LeaseLost
from queue_core.model import transitions
from queue_core.model.jobs import ERROR_HISTORY, Status

from .factory import LEASE, NOW, later, queued_job, running_job, with_status

# new_job


def test_new_job_is_queued_unattempted_and_runnable_now() -> None:
    job = queued_job()

    assert job.status == Status.QUEUED
    assert job.attempts == 0
    assert job.run_after == NOW
    assert job.lease_token is None and job.lease_until is None
    assert job.errors == []


def test_new_job_with_delay_waits_that_long() -> None:
    job = queued_job(delay=90)

    assert job.run_after == later(90)
    assert not transitions.is_runnable(job, later(89))
    assert transitions.is_runnable(job, later(90))


# claim


def test_claim_leases_the_job_and_counts_an_attempt() -> None:
    token = uuid4()

    job = transitions.claim(queued_job(), now=NOW, lease_seconds=LEASE, token=token)

    assert job.status == Status.RUNNING
    assert job.attempts == 1
    assert job.lease_token == token
    assert job.lease_until == later(LEASE)
    assert job.started_at == NOW


def test_claim_prefers_the_jobs_own_lease_over_the_workers_default() -> None:
    job = transitions.claim(queued_job(lease_seconds=600), now=NOW, lease_seconds=5, token=uuid4())

    assert job.lease_until == later(600)


def test_claim_of_a_job_scheduled_in_the_future_is_refused() -> None:
    job = queued_job(delay=60)

    with pytest.raises(InvalidTransition):
        transitions.claim(job, now=later(59), lease_seconds=LEASE, token=uuid4())


@pytest.mark.parametrize("status", [Status.RUNNING, Status.SUCCEEDED, Status.DEAD])
def test_claim_of_a_job_that_is_not_waiting_is_refused(status: Status) -> None:
    job = with_status(queued_job(), status=status)

    with pytest.raises(InvalidTransition) as raised:
        transitions.claim(job, now=NOW, lease_seconds=LEASE, token=uuid4())

    assert raised.value.operation == "claim"


def test_claim_of_a_retrying_job_whose_backoff_elapsed_is_allowed() -> None:
    job = with_status(queued_job(), status=Status.RETRYING, attempts=1, run_after=later(2))

    claimed = transitions.claim(job, now=later(2), lease_seconds=LEASE, token=uuid4())

    assert claimed.attempts == 2


def test_claim_order_is_priority_desc_then_run_after_then_created_at() -> None:
    low = queued_job(priority=0)
    high = queued_job(priority=5)
    early = queued_job(priority=0, run_after=later(-10))
    older = with_status(queued_job(priority=0), created_at=later(-1))

    ordered = sorted([low, older, early, high], key=transitions.claim_order)

    assert ordered == [high, early, older, low]


# Outcomes applied with finish


def test_succeeded_outcome_stores_the_result_and_ends_the_job() -> None:
    job = running_job()

    done = transitions.finish(job, transitions.succeeded(job, {"vectors": 12}), now=later(3))

    assert done.status == Status.SUCCEEDED
    assert done.result == {"vectors": 12}
    assert done.finished_at == later(3)
    assert done.lease_token is None and done.lease_until is None
    assert done.error is None and done.errors == []


def test_failed_outcome_with_attempts_left_retries_after_backoff() -> None:
    job = running_job(max_attempts=3)

    outcome = transitions.failed(job, "boom")
    after = transitions.finish(job, outcome, now=later(5))

    assert after.status == Status.RETRYING
    assert after.run_after == later(5 + job.backoff.delay(1))
    assert after.error == "boom"
    assert after.errors == [{"attempt": 1, "at": later(5).isoformat(), "error": "boom"}]
    assert after.finished_at is None


def test_failed_outcome_on_the_last_attempt_is_dead_and_keeps_the_reason() -> None:
    job = running_job(max_attempts=1)

    after = transitions.finish(job, transitions.failed(job, "boom"), now=later(1))

    assert after.status == Status.DEAD
    assert after.error == "boom"
    assert after.finished_at == later(1)


def test_permanent_failure_is_dead_even_with_attempts_left() -> None:
    job = running_job(max_attempts=10)

    after = transitions.finish(job, transitions.failed(job, "bad", permanent=True), now=NOW)

    assert after.status == Status.DEAD
    assert after.attempts == 1


def test_failed_outcome_with_jitter_shortens_the_delay() -> None:
    job = running_job(backoff_policy={"base": 10, "max": 100, "jitter": 0.5})

    outcome = transitions.failed(job, "boom", rand=0.5)

    assert outcome.delay == pytest.approx(7.5)


def test_snoozed_outcome_requeues_later_and_gives_back_the_attempt() -> None:
    job = running_job(max_attempts=3)

    after = transitions.finish(job, transitions.snoozed(job, 45), now=NOW)

    assert after.status == Status.QUEUED
    assert after.run_after == later(45)
    assert (after.attempts, after.max_attempts, after.snoozes) == (job.attempts - 1, 3, 1)
    assert after.error is None and after.errors == []
    assert after.finished_at is None


def test_cancelled_while_running_outcome_ends_the_job_cancelled() -> None:
    job = running_job()

    after = transitions.finish(job, transitions.cancelled_while_running(job), now=later(2))

    assert after.status == Status.CANCELLED
    assert after.error == "cancelled while running"
    assert after.finished_at == later(2)


def test_an_outcome_needs_a_leased_job() -> None:
    with pytest.raises(InvalidTransition):
        transitions.succeeded(queued_job())


# Fencing


def test_finish_with_a_stale_token_is_refused_as_lease_lost() -> None:
    job = running_job()
    stale = with_status(job, lease_token=uuid4())

    with pytest.raises(LeaseLost) as raised:
        transitions.finish(job, transitions.succeeded(stale, 1), now=NOW)

    assert raised.value.job_id == job.id


def test_finish_of_a_job_that_already_finished_is_refused() -> None:
    job = running_job()
    outcome = transitions.succeeded(job, 1)
    done = transitions.finish(job, outcome, now=NOW)

    with pytest.raises(LeaseLost):
        transitions.finish(done, outcome, now=NOW)


def test_late_worker_cannot_overwrite_the_attempt_that_reclaimed_its_job() -> None:
    first = running_job(max_attempts=3)
    late_outcome = transitions.succeeded(first, "late")
    reclaimed = transitions.reclaim(first, now=later(LEASE))
    second = transitions.claim(
        reclaimed, now=reclaimed.run_after, lease_seconds=LEASE, token=uuid4()
    )

    with pytest.raises(LeaseLost):
        transitions.finish(second, late_outcome, now=later(LEASE + 5))

    assert second.attempts == 2


def test_extend_lease_with_the_current_token_moves_the_deadline() -> None:
    job = running_job()

    extended = transitions.extend_lease(job, token=job.lease_token, seconds=120, now=later(10))

    assert extended.lease_until == later(130)


def test_extend_lease_with_another_token_is_refused() -> None:
    with pytest.raises(LeaseLost):
        transitions.extend_lease(running_job(), token=uuid4(), seconds=120, now=NOW)


def test_report_progress_with_the_current_token_stores_it() -> None:
    job = running_job()

    after = transitions.report_progress(job, token=job.lease_token, progress={"pct": 40}, now=NOW)

    assert after.progress == {"pct": 40}


def test_report_progress_after_the_job_finished_is_refused() -> None:
    job = running_job()
    done = transitions.finish(job, transitions.succeeded(job), now=NOW)

    with pytest.raises(LeaseLost):
        transitions.report_progress(done, token=job.lease_token, progress=1, now=NOW)


# Reclaim


def test_reclaim_before_the_lease_expires_is_refused() -> None:
    job = running_job()

    assert not transitions.is_reclaimable(job, later(LEASE - 1))
    with pytest.raises(InvalidTransition):
        transitions.reclaim(job, now=later(LEASE - 1))


def test_reclaim_with_attempts_left_retries_with_backoff_as_a_failed_attempt() -> None:
    job = running_job(max_attempts=3)

    after = transitions.reclaim(job, now=later(LEASE))

    assert transitions.is_reclaimable(job, later(LEASE))
    assert after.status == Status.RETRYING
    assert after.error == transitions.RECLAIM_ERROR
    assert after.run_after == later(LEASE) + timedelta(seconds=job.backoff.delay(1))
    assert after.lease_token is None


def test_reclaim_with_attempts_used_up_is_dead() -> None:
    job = running_job(max_attempts=1)

    after = transitions.reclaim(job, now=later(LEASE))

    assert after.status == Status.DEAD
    assert after.error == transitions.RECLAIM_ERROR


def test_reclaim_of_a_job_asked_to_cancel_ends_it_cancelled() -> None:
    job = transitions.cancel(running_job(max_attempts=3), now=NOW)

    after = transitions.reclaim(job, now=later(LEASE))

    assert after.status == Status.CANCELLED
    assert after.cancel_requested is False


def test_error_history_keeps_only_the_last_twenty_failures() -> None:
    job = queued_job(max_attempts=1000)
    now = NOW
    for attempt in range(1, 26):
        job = transitions.claim(job, now=job.run_after, lease_seconds=LEASE, token=uuid4())
        now = job.run_after
        job = transitions.finish(job, transitions.failed(job, f"failure {attempt}"), now=now)

    assert len(job.errors) == ERROR_HISTORY
    assert [e["error"] for e in job.errors] == [f"failure {n}" for n in range(6, 26)]
    assert job.errors[-1]["attempt"] == 25


# Cancel


@pytest.mark.parametrize("status", [Status.QUEUED, Status.RETRYING])
def test_cancel_of_a_waiting_job_cancels_it_at_once(status: Status) -> None:
    job = with_status(queued_job(), status=status)

    after = transitions.cancel(job, now=later(1))

    assert after.status == Status.CANCELLED
    assert after.finished_at == later(1)


def test_cancel_of_a_running_job_only_asks_it_to_stop() -> None:
    job = running_job()

    after = transitions.cancel(job, now=later(1))

    assert after.status == Status.RUNNING
    assert after.cancel_requested is True
    assert after.lease_token == job.lease_token


@pytest.mark.parametrize("status", [Status.SUCCEEDED, Status.DEAD, Status.CANCELLED])
def test_cancel_of_a_finished_job_is_refused(status: Status) -> None:
    job = with_status(queued_job(), status=status)

    with pytest.raises(InvalidTransition) as raised:
        transitions.cancel(job, now=NOW)

    assert raised.value.status == status


# Retry


def test_retry_of_a_dead_job_requeues_it_with_fresh_attempts_and_keeps_its_errors() -> None:
    job = running_job(max_attempts=1)
    dead = transitions.finish(job, transitions.failed(job, "boom"), now=NOW)

    after = transitions.retry(dead, now=later(60))

    assert after.status == Status.QUEUED
    assert after.attempts == 0
    assert after.run_after == later(60)
    assert after.finished_at is None
    assert after.error == "boom"
    assert [e["error"] for e in after.errors] == ["boom"]


def test_retry_of_a_cancelled_job_requeues_it() -> None:
    cancelled = transitions.cancel(queued_job(), now=NOW)

    after = transitions.retry(cancelled, now=later(1))

    assert after.status == Status.QUEUED
    assert transitions.is_runnable(after, later(1))


@pytest.mark.parametrize(
    "status", [Status.QUEUED, Status.RUNNING, Status.RETRYING, Status.SUCCEEDED]
)
def test_retry_of_a_job_that_is_not_dead_or_cancelled_is_refused(status: Status) -> None:
    job = with_status(queued_job(), status=status)

    with pytest.raises(InvalidTransition):
        transitions.retry(job, now=NOW)
