"""Durable steps against a real database: steps stored once and skipped on later runs,
suspension, sleep, signals, limits, operator retry, async handlers and the lease fence."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest

import queue_core
from queue_core import JobContext, PostgresStore, Registry, Runner, Status, StepStore
from queue_core.errors import InvalidJob, InvalidTransition, JobNotFound, LeaseLost
from queue_core.model.steps import MAX_SIGNAL_BYTES, WaitTimeout

Connect = Callable[[], psycopg.Connection]
INSTANT = {"base": 0.001, "max": 0.001}  # retries become runnable at once


@pytest.fixture
def store(conn: psycopg.Connection) -> PostgresStore:
    return PostgresStore(conn)


@pytest.fixture
def registry() -> Registry:
    return Registry()


def enqueue(store: PostgresStore, registry: Registry, type_: str, **options: Any) -> UUID:
    return store.enqueue(registry.spec(type_, **options)).id


def run_until_done(store: PostgresStore, registry: Registry, job_id: UUID, **options: Any) -> int:
    """Tick until the job is finished; returns how many ticks it took."""
    options.setdefault("rand", lambda: 0.0)
    with Runner(store, registry, **options) as runner:
        for ticks in range(1, 50):
            runner.tick()
            if store.get(job_id).is_terminal:
                return ticks
    raise AssertionError(f"job {job_id} not finished after 50 ticks: {store.get(job_id)}")


def stored_steps(store: PostgresStore, job_id: UUID) -> list[str]:
    return [s["name"] for s in StepStore(store).show(job_id).steps]


def test_a_step_runs_once_and_a_failure_reruns_only_the_failed_step(
    store: PostgresStore, registry: Registry
) -> None:
    calls: list[str] = []

    @registry.task("two", max_attempts=3, backoff=INSTANT)
    def two(job: JobContext) -> dict[str, Any]:
        def first() -> int:
            calls.append("first")
            return 1

        def second() -> int:
            calls.append("second")
            if calls.count("second") == 1:
                raise TimeoutError("flaky")
            return 2

        return {"sum": job.step("first", first) + job.step("second", second)}

    job_id = enqueue(store, registry, "two")
    run_until_done(store, registry, job_id)

    job = store.get(job_id)
    assert (job.status, job.result, job.attempts) == (Status.SUCCEEDED, {"sum": 3}, 2)
    assert calls == ["first", "second", "second"]
    assert stored_steps(store, job_id) == ["first", "second"]


def test_a_step_returns_its_result_as_stored_json_the_first_time_too(
    store: PostgresStore, registry: Registry
) -> None:
    seen: list[Any] = []

    @registry.task("shape")
    def shape(job: JobContext) -> None:
        seen.append(job.step("tuple", lambda: (1, 2)))

    run_until_done(store, registry, enqueue(store, registry, "shape"))
    assert seen == [[1, 2]]


def test_suspend_gives_the_attempt_back_and_keeps_the_steps(
    store: PostgresStore, registry: Registry
) -> None:
    @registry.task("pause")
    def pause(job: JobContext) -> str:
        job.step("before", lambda: "done")
        if not job.step("paused", lambda: False):
            pass
        job.suspend(3600)
        return "never"

    job_id = enqueue(store, registry, "pause")
    with Runner(store, registry) as runner:
        report = runner.tick()

    job = store.get(job_id)
    view = StepStore(store).show(job_id)
    assert (job.status, job.attempts, job.lease_token) == (Status.QUEUED, 0, None)
    assert job.run_after > job.updated_at + timedelta(seconds=3500)
    # Suspended, not yet back: it has resumed 0 times (the row counts the suspension).
    assert view.resumes == 0 and view.wait is not None and view.wait.kind == "suspend"
    assert [s["name"] for s in view.steps] == ["before", "paused"]
    assert (report.suspended, report.steps, report.lost_leases, report.retried) == (1, 2, 0, 0)


def test_with_no_time_left_every_claim_still_completes_one_step(
    store: PostgresStore, registry: Registry
) -> None:
    runs: list[str] = []

    @registry.task("long", step_seconds=5)
    def long(job: JobContext) -> int:
        for i in range(3):
            job.step(f"part:{i}", lambda i=i: runs.append(f"part:{i}"))
        return 3

    job_id = enqueue(store, registry, "long")
    ticks = run_until_done(store, registry, job_id, time_left=lambda: 0.0)

    job = store.get(job_id)
    assert (job.status, job.attempts) == (Status.SUCCEEDED, 1)
    assert runs == ["part:0", "part:1", "part:2"]
    assert ticks == 3
    assert StepStore(store).show(job_id).resumes == 2


def test_a_sleeping_job_is_not_claimable_until_it_wakes(
    store: PostgresStore, registry: Registry
) -> None:
    @registry.task("nap")
    def nap(job: JobContext) -> str:
        job.sleep("nap", 0.5)
        return "rested"

    job_id = enqueue(store, registry, "nap")
    with Runner(store, registry) as runner:
        runner.tick()
        assert store.get(job_id).status == Status.QUEUED
        assert runner.tick().claimed == 0  # asleep: not claimable
        wake = store.get(job_id).run_after
        while store.now() < wake:
            time.sleep(0.05)
        report = runner.tick()

    assert (report.claimed, report.succeeded, report.resumed) == (1, 1, 1)
    job = store.get(job_id)
    assert (job.status, job.result, job.attempts) == (Status.SUCCEEDED, "rested", 1)


def test_a_signal_wakes_a_waiting_job_with_its_payload(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    @registry.task("approval")
    def approval(job: JobContext) -> Any:
        return job.wait_for("approve", timeout=3600)

    job_id = enqueue(store, registry, "approval")
    with Runner(store, registry) as runner:
        runner.tick()
        assert runner.tick().claimed == 0  # waiting: not claimable
        assert queue_core.signal(conn, job_id, "approve", {"ok": True}) is True
        report = runner.tick()

    assert report.succeeded == 1
    assert store.get(job_id).result == {"ok": True}


def test_a_signal_sent_before_the_wait_is_kept_for_it(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    @registry.task("early")
    def early(job: JobContext) -> Any:
        return job.wait_for("go")

    job_id = enqueue(store, registry, "early")
    assert queue_core.signal(conn, job_id, "go", [1, 2]) is False
    run_until_done(store, registry, job_id)
    assert store.get(job_id).result == [1, 2]


def test_wait_for_raises_wait_timeout_in_the_handler_when_the_timeout_passes(
    store: PostgresStore, registry: Registry
) -> None:
    caught: list[str] = []

    @registry.task("impatient")
    def impatient(job: JobContext) -> str:
        try:
            job.wait_for("never", timeout=0.3)
        except WaitTimeout as exc:
            caught.append(exc.name)
            return "timed out"
        return "signalled"

    job_id = enqueue(store, registry, "impatient")
    with Runner(store, registry) as runner:
        runner.tick()
        wake = store.get(job_id).run_after
        while store.now() < wake:
            time.sleep(0.05)
        runner.tick()
    assert store.get(job_id).result == "timed out" and caught == ["never"]


def test_a_timed_out_wait_stays_timed_out_on_later_runs(
    store: PostgresStore, registry: Registry
) -> None:
    timeouts: list[str] = []

    @registry.task("fallback")
    def fallback(job: JobContext) -> str:
        try:
            job.wait_for("approve", timeout=0.2)
        except WaitTimeout:
            timeouts.append("approve")
        job.sleep("then", 0.2)
        return "fell back"

    job_id = enqueue(store, registry, "fallback")
    with Runner(store, registry) as runner:
        for _ in range(20):
            runner.tick()
            job = store.get(job_id)
            if job.is_terminal:
                break
            if job.run_after > store.now():
                assert job.run_after < store.now() + timedelta(seconds=1)
                time.sleep((job.run_after - store.now()).total_seconds())

    assert store.get(job_id).result == "fell back"
    assert timeouts == ["approve", "approve"]  # the timeout ran, then was replayed after sleep
    assert StepStore(store).show(job_id).resumes == 2


def test_a_signal_racing_the_suspension_still_wakes_the_job(
    store: PostgresStore, registry: Registry, connect: Connect
) -> None:
    """The signal's transaction holds the job row while the handler suspends: the
    suspension waits for it, sees its name on the row, and leaves the job runnable."""
    loaded = threading.Event()
    sent = threading.Event()

    @registry.task("race")
    def race(job: JobContext) -> Any:
        job.step("loaded", lambda: None)  # the job's signals are read here: none yet
        loaded.set()
        assert sent.wait(10)
        return job.wait_for("go")

    job_id = enqueue(store, registry, "race")
    sender = connect()
    sender.autocommit = False
    with Runner(store, registry) as runner:
        worker = threading.Thread(target=runner.tick)
        with sender.transaction():
            worker.start()
            assert loaded.wait(10)
            queue_core.signal(sender, job_id, "go", "now")
            sent.set()
            time.sleep(0.3)  # the suspension is now blocked on the signal's row lock
        worker.join(10)
        job = store.get(job_id)
        assert job.status == Status.QUEUED and job.run_after <= store.now()
        runner.tick()
    assert store.get(job_id).result == "now"


def test_signals_to_unknown_or_finished_jobs_and_repeated_names_are_refused(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    @registry.task("quick")
    def quick(job: JobContext) -> None:
        return None

    done = enqueue(store, registry, "quick")
    live = enqueue(store, registry, "quick", delay=3600)
    run_until_done(store, registry, done)

    with pytest.raises(JobNotFound):
        queue_core.signal(conn, "00000000-0000-0000-0000-000000000000", "x")
    with pytest.raises(JobNotFound):
        queue_core.signal(conn, "not-a-uuid", "x")
    with pytest.raises(InvalidTransition, match="succeeded"):
        queue_core.signal(conn, done, "x")
    queue_core.signal(conn, live, "x", 1)
    with pytest.raises(InvalidJob, match="already sent"):
        queue_core.signal(conn, live, "x", 2)
    with pytest.raises(InvalidJob, match="over the limit"):
        queue_core.signal(conn, live, "big", "a" * MAX_SIGNAL_BYTES)
    with pytest.raises(InvalidJob):
        queue_core.signal(conn, live, "", None)
    with pytest.raises(InvalidJob):
        queue_core.signal(conn, live, "nan", float("nan"))
    assert [s["name"] for s in StepStore(store).show(live).signals] == ["x"]
    assert StepStore(store).show(done).signals == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (lambda job: job.step("", lambda: 1), "non-empty"),
        (lambda job: [job.step("a", lambda: 1), job.step("a", lambda: 2)], "twice"),
        (lambda job: job.step("nan", lambda: float("nan")), "not JSON"),
        (lambda job: job.step("big", lambda: "x" * 300_000), "over the limit"),
        (lambda job: job.step("outer", lambda: job.step("inner", lambda: 1)), "do not nest"),
        (lambda job: job.step("outer", lambda: job.suspend()), "inside a step"),
        (lambda job: job.sleep("nap", -1), "sleep seconds"),
        (lambda job: job.step("not-a-function", 42), "runs a function"),
    ],
)
def test_a_misused_step_is_a_clear_error_on_the_job_that_stores_nothing_more(
    store: PostgresStore, registry: Registry, body: Callable[[JobContext], Any], message: str
) -> None:
    @registry.task("misuse", max_attempts=3)
    def misuse(job: JobContext) -> None:
        job.step("fine", lambda: "kept")
        body(job)

    job_id = enqueue(store, registry, "misuse")
    run_until_done(store, registry, job_id)

    job = store.get(job_id)
    assert job.status == Status.DEAD and job.attempts == 1
    assert message in (job.error or "")
    assert stored_steps(store, job_id) in (["fine"], ["fine", "a"])


def test_a_job_stores_at_most_the_step_limit(
    store: PostgresStore, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("queue_core.model.steps.MAX_STEPS", 3)

    @registry.task("many")
    def many(job: JobContext) -> None:
        for i in range(5):
            job.step(f"s{i}", lambda: None)

    job_id = enqueue(store, registry, "many")
    run_until_done(store, registry, job_id)
    assert "3 steps" in (store.get(job_id).error or "")
    assert stored_steps(store, job_id) == ["s0", "s1", "s2"]


def test_operator_retry_keeps_the_steps_and_a_fresh_retry_clears_them(
    store: PostgresStore, registry: Registry
) -> None:
    calls: list[str] = []
    broken = [True]

    @registry.task("redrive", max_attempts=1)
    def redrive(job: JobContext) -> str:
        job.step("expensive", lambda: calls.append("expensive"))
        if broken[0]:
            raise RuntimeError("downstream is down")
        return "ok"

    job_id = enqueue(store, registry, "redrive")
    run_until_done(store, registry, job_id)
    assert store.get(job_id).status == Status.DEAD
    broken[0] = False

    StepStore(store).retry(job_id, fresh=False)
    run_until_done(store, registry, job_id)
    assert store.get(job_id).status == Status.SUCCEEDED and calls == ["expensive"]

    store.cancel(enqueue(store, registry, "redrive"))  # unrelated; fresh needs dead/cancelled
    broken[0] = True
    calls.clear()
    other = enqueue(store, registry, "redrive")
    run_until_done(store, registry, other)
    StepStore(store).retry(other, fresh=True)
    assert stored_steps(store, other) == [] and StepStore(store).show(other).resumes == 0
    broken[0] = False
    run_until_done(store, registry, other)
    assert calls == ["expensive", "expensive"]


def test_async_handlers_await_steps_sleeps_and_signals(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    calls: list[str] = []

    @registry.task("async-steps")
    async def handler(job: Any) -> Any:
        async def fetch() -> str:
            calls.append("fetch")
            return "audio"

        audio = await job.step("fetch", fetch)
        plain = await job.step("plain", lambda: 7)
        approved = await job.wait_for("approve")
        return [audio, plain, approved]

    job_id = enqueue(store, registry, "async-steps")
    with Runner(store, registry) as runner:
        runner.tick()
        queue_core.signal(conn, job_id, "approve", True)
        runner.tick()
    assert store.get(job_id).result == ["audio", 7, True] and calls == ["fetch"]


def test_a_worker_that_lost_its_lease_mid_step_cannot_store_that_step(
    store: PostgresStore, registry: Registry, connect: Connect
) -> None:
    """The step's fn is still running when the lease expires and another worker takes the
    job; the stale worker's step write is refused and nothing of it is stored."""
    inside = threading.Event()
    release = threading.Event()
    stale: list[bool] = []

    @registry.task("slow-step", max_attempts=3)
    def slow_step(job: JobContext) -> str:
        def work() -> str:
            if not stale:
                stale.append(True)
                inside.set()
                assert release.wait(10)
                return "stale result"
            return "fresh result"

        return job.step("work", work)

    job_id = enqueue(store, registry, "slow-step")
    reports: list[Any] = []
    with Runner(store, registry) as runner:
        worker = threading.Thread(target=lambda: reports.append(runner.tick()))
        worker.start()
        assert inside.wait(10)
        other = PostgresStore(connect())
        later = other.now() + timedelta(hours=1)
        assert [j.id for j in other.reclaim(now=later)] == [job_id]
        later += timedelta(minutes=10)  # past the retry's backoff
        (retaken,) = other.claim(now=later)
        release.set()
        worker.join(10)

    assert stored_steps(store, job_id) == []
    assert reports[0].lost_leases == 1 and reports[0].steps == 0
    assert retaken.lease_token is not None
    with pytest.raises(LeaseLost):
        StepStore(other).complete(job_id, uuid4(), "work", '"forged"', now=later)
    StepStore(other).complete(job_id, retaken.lease_token, "work", '"fresh"', now=later)
    assert stored_steps(store, job_id) == ["work"]  # the current holder stores it
