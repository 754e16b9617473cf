"""The deploy check's replay as plain values: a handler run against a stored history, where
it breaks and where the history ends, and job.patched's rule (steps.replaying)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from queue_core import JobContext, Registry
from queue_core.model.jobs import Job, Status
from queue_core.model.steps import FOREVER, Durable, Wait, WaitKind, frontier, replaying
from queue_core.runner.replay import History, check, replay

AT = datetime(2026, 12, 6, tzinfo=UTC)


def job_row(type_: str = "t") -> Job:
    return Job(
        id=UUID(int=1),
        queue="default",
        type=type_,
        user_id=None,
        status=Status.QUEUED,
        payload={},
        idempotency_key=None,
        attempts=1,
        max_attempts=3,
        priority=0,
        run_after=AT,
        lease_until=None,
        lease_token=None,
        progress=None,
        result=None,
        error=None,
        errors=[],
        lease_seconds=None,
        backoff_base=1,
        backoff_factor=2,
        backoff_max=300,
        backoff_jitter=0,
        cancel_requested=False,
        created_at=AT,
        updated_at=AT,
        started_at=None,
        finished_at=None,
    )


def history(*names: str, frontier: tuple[str, ...] = (), patches: tuple[str, ...] = ()) -> History:
    return History(
        job_row(),
        "v1",
        tuple((name, f"{name}-result") for name in names),
        frozenset(patches),
        frontier,
    )


def task_of(handler: Any) -> Any:
    registry = Registry()
    registry.task("t")(handler)
    return registry.tasks["t"]


def test_steps_asked_in_another_order_replay_and_return_their_stored_results() -> None:
    got: list[Any] = []

    def handler(job: JobContext) -> None:
        got.append(job.step("b", lambda: "ran"))
        got.append(job.step("a", lambda: "ran"))
        job.step("c", lambda: "ran")  # past the history's end: not run

    replayed = replay(task_of(handler), history("a", "b"))

    assert replayed.broken is None and replayed.replayed == 2
    assert got == ["b-result", "a-result"]


def test_a_handler_that_raises_or_returns_before_its_stored_steps_breaks() -> None:
    def raises(job: JobContext) -> None:
        job.step("a", lambda: None)
        raise KeyError("gone")

    def returns(job: JobContext) -> None:
        job.step("a", lambda: None)

    for handler, reason in ((raises, "raises KeyError"), (returns, "returns before")):
        broken = replay(task_of(handler), history("a", "b")).broken
        assert broken is not None and (broken.position, broken.stored) == (1, "b")
        assert broken.reason.startswith(reason)


def test_the_replay_ends_at_the_point_the_last_run_stopped_and_breaks_on_another() -> None:
    def waits(job: JobContext) -> None:
        job.step("a", lambda: None)
        job.wait_for("approve")
        raise AssertionError("not reached: the history ends at the wait")

    def renamed_wait(job: JobContext) -> None:
        job.step("a", lambda: None)
        job.wait_for("approval")

    assert replay(task_of(waits), history("a", frontier=("approve",))).broken is None
    broken = replay(task_of(renamed_wait), history("a", frontier=("approve",))).broken
    assert broken is not None and (broken.stored, broken.asked) == ("approve", "approval")


def test_an_async_handler_replays_its_stored_steps() -> None:
    async def handler(job: Any) -> None:
        await job.step("a", lambda: None)
        await job.step("renamed", lambda: None)

    broken = replay(task_of(handler), history("a", "b")).broken
    assert broken is not None and (broken.position, broken.stored, broken.asked) == (
        1,
        "b",
        "renamed",
    )


def test_check_counts_the_histories_that_lack_a_patch() -> None:
    def handler(job: JobContext) -> None:
        job.step("a", lambda: None)
        if job.patched("p"):
            job.step("new", lambda: None)
        job.step("b", lambda: None)

    old, marked = history("a", "b"), history("a", "new", "b", patches=("p",))
    found = check({"t": task_of(handler)}, [old, marked])

    assert found.broken == []
    assert found.patches == {"p": 1}


def test_patched_replays_until_every_stored_step_and_the_stopping_point_are_asked_for() -> None:
    waiting = Durable(steps={"a": 1}, wait=Wait(WaitKind.SIGNAL, "approve", FOREVER))

    assert frontier(waiting) == ["approve"]
    assert replaying(waiting, {"a"})
    assert not replaying(waiting, {"a", "approve"})
    assert replaying(Durable(steps={"a": 1, "b": 2}), {"a"})
    assert not replaying(Durable(steps={"a": 1}, wait=Wait(WaitKind.SUSPEND, None, AT)), {"a"})
