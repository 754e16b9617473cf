"""Durable steps as pure values: storing a step, suspending, delivering signals, and each
refusal (stale lease, repeated or empty name, bad result, limits)."""

from __future__ import annotations

from dataclasses import replace
from uuid import uuid4

import pytest

from queue_core.errors import InvalidJob, InvalidTransition, LeaseLost
from queue_core.model import steps, transitions
from queue_core.model.jobs import Status
from queue_core.model.steps import FOREVER, Durable, InvalidStep, Wait, WaitKind

from .factory import LEASE, NOW, later, queued_job, running_job


def test_a_completed_step_is_stored_as_json() -> None:
    job = running_job()

    state = steps.complete_step(job, Durable(), token=job.lease_token, name="a", result=(1, 2))

    assert state.steps == {"a": [1, 2]} and state.step_bytes == len("[1,2]")


def test_a_step_write_with_a_stale_token_is_refused() -> None:
    job = running_job()
    with pytest.raises(LeaseLost):
        steps.complete_step(job, Durable(), token=uuid4(), name="a", result=1)
    finished = transitions.finish(job, transitions.succeeded(job), now=NOW)
    with pytest.raises(LeaseLost):
        steps.complete_step(finished, Durable(), token=job.lease_token, name="a", result=1)


@pytest.mark.parametrize(
    ("name", "result", "message"),
    [
        ("", 1, "non-empty"),
        (7, 1, "non-empty"),
        ("done", 1, "unique"),
        ("nan", float("nan"), "not JSON"),
        ("nul", "a\x00b", "NUL"),
        ("big", "x" * steps.MAX_STEP_BYTES, "over the limit"),
    ],
)
def test_a_step_that_cannot_be_stored_is_refused_before_anything_changes(
    name: object, result: object, message: str
) -> None:
    job = running_job()
    state = Durable(steps={"done": 1}, step_bytes=1)
    with pytest.raises(InvalidStep, match=message):
        steps.complete_step(
            job, state, token=job.lease_token, name=steps.step_name(name), result=result
        )
    assert state.steps == {"done": 1}


def test_a_job_holds_at_most_max_steps() -> None:
    job = running_job()
    full = Durable(steps={f"s{i}": None for i in range(steps.MAX_STEPS)})
    with pytest.raises(InvalidStep, match="10000 steps"):
        steps.complete_step(job, full, token=job.lease_token, name="one-more", result=None)


def test_a_suspension_queues_the_job_at_its_wake_time_and_gives_the_attempt_back() -> None:
    job = running_job()
    wait = Wait(WaitKind.SLEEP, "nap", later(60))

    suspended, state = steps.suspend(
        job, Durable(steps={"a": 1}), token=job.lease_token, wait=wait, now=later(5)
    )

    assert suspended.status == Status.QUEUED and suspended.attempts == job.attempts - 1
    assert suspended.run_after == later(60) and suspended.lease_token is None
    assert state.steps == {"a": 1} and state.resumes == 1 and state.wait == wait
    assert not transitions.is_runnable(suspended, later(59))
    reclaimed = transitions.claim(suspended, now=later(60), lease_seconds=LEASE, token=uuid4())
    assert reclaimed.attempts == job.attempts  # suspending cost no attempt


def test_waiting_for_a_signal_already_delivered_leaves_the_job_runnable_now() -> None:
    job = running_job()
    state = Durable(signals={"approve": True})
    suspended, _ = steps.suspend(
        job,
        state,
        token=job.lease_token,
        wait=Wait(WaitKind.SIGNAL, "approve", FOREVER),
        now=later(1),
    )
    assert suspended.run_after == later(1)


def test_a_suspension_is_refused_without_the_lease_or_when_cancel_was_asked() -> None:
    job = running_job()
    wait = Wait(WaitKind.SUSPEND, None, NOW)
    with pytest.raises(LeaseLost):
        steps.suspend(job, Durable(), token=uuid4(), wait=wait, now=NOW)
    with pytest.raises(InvalidTransition):
        steps.suspend(
            replace(job, cancel_requested=True),
            Durable(),
            token=job.lease_token,
            wait=wait,
            now=NOW,
        )


def test_a_signal_wakes_a_job_waiting_for_it_and_only_that_one() -> None:
    waiting = replace(queued_job(), run_after=FOREVER)
    state = Durable(wait=Wait(WaitKind.SIGNAL, "approve", FOREVER))

    other, _ = steps.deliver_signal(waiting, state, name="other", payload=1, now=later(3))
    woken, after = steps.deliver_signal(waiting, state, name="approve", payload=2, now=later(3))

    assert other.run_after == FOREVER
    assert woken.run_after == later(3) and after.signals == {"approve": 2}


def test_a_signal_to_a_running_job_is_kept_for_its_wait() -> None:
    job = running_job()
    kept, state = steps.deliver_signal(job, Durable(), name="go", payload=None, now=later(1))
    assert kept.status == Status.RUNNING and state.signals == {"go": None}


def test_signals_to_finished_jobs_repeated_names_and_too_many_bytes_are_refused() -> None:
    job = running_job()
    done = transitions.finish(job, transitions.succeeded(job), now=NOW)
    with pytest.raises(InvalidTransition):
        steps.deliver_signal(done, Durable(), name="go", payload=None, now=NOW)
    with pytest.raises(InvalidJob, match="already sent"):
        steps.deliver_signal(job, Durable(signals={"go": 1}), name="go", payload=None, now=NOW)
    nearly_full = Durable(signal_bytes=steps.MAX_SIGNAL_BYTES - 2)
    with pytest.raises(InvalidJob, match="over the limit"):
        steps.deliver_signal(job, nearly_full, name="x", payload="abc", now=NOW)


def test_the_suspended_outcome_is_stored_already_and_not_a_plain_success() -> None:
    job = running_job()
    outcome = steps.suspended(job)
    assert outcome.suspended and outcome.status == Status.QUEUED
    assert not outcome.is_plain_success


def test_wake_time_is_capped_at_forever() -> None:
    assert steps.wake_time(NOW, 10) == later(10)
    assert steps.wake_time(NOW, 1e18) == FOREVER


def test_a_wait_describes_itself_for_people() -> None:
    assert Wait(WaitKind.SLEEP, "nap", NOW).describe() == f"sleep 'nap' until {NOW.isoformat()}"
    assert Wait(WaitKind.SIGNAL, "approve", FOREVER).describe() == "signal 'approve' no timeout"


def test_a_stored_timeout_replays_as_wait_timeout_and_a_payload_as_itself() -> None:
    with pytest.raises(steps.WaitTimeout) as raised:
        steps.waited("approve", steps.timed_out(NOW))
    assert raised.value.until == NOW and raised.value.name == "approve"
    assert steps.waited("approve", {"ok": True}) == {"ok": True}
