"""The tick runner against a real database: handler outcomes, leases from inside handlers,
cancellation, reports, transactions and bounded concurrency."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg.pq import TransactionStatus

from queue_core import (
    JobContext,
    PermanentError,
    PostgresStore,
    Registry,
    RetryAfter,
    Runner,
    Status,
)

Connect = Callable[[], psycopg.Connection]
INSTANT = {"base": 0.001, "max": 0.001}  # retries become runnable at once


@pytest.fixture
def store(conn: psycopg.Connection) -> PostgresStore:
    return PostgresStore(conn)


@pytest.fixture
def registry() -> Registry:
    return Registry()


def runner(store: PostgresStore, registry: Registry, **options: Any) -> Runner:
    options.setdefault("rand", lambda: 0.0)
    return Runner(store, registry, **options)


def enqueue(store: PostgresStore, registry: Registry, type_: str, **options: Any) -> UUID:
    return store.enqueue(registry.spec(type_, **options)).id


def test_a_sync_handlers_return_value_becomes_the_result(
    store: PostgresStore, registry: Registry
) -> None:
    @registry.task("embed")
    def embed(job: JobContext) -> dict[str, Any]:
        return {"vectors": job.payload["n"] * 2, "attempt": job.attempt}

    job_id = enqueue(store, registry, "embed", payload={"n": 6})

    with runner(store, registry) as r:
        report = r.tick()

    job = store.get(job_id)
    assert (job.status, job.result) == (Status.SUCCEEDED, {"vectors": 12, "attempt": 1})
    assert (report.claimed, report.succeeded, report.batches) == (1, 1, 1)


def test_an_async_handlers_return_value_becomes_the_result(
    store: PostgresStore, registry: Registry
) -> None:
    @registry.task("transcribe")
    async def transcribe(job: JobContext) -> str:
        await asyncio.sleep(0)
        return f"text of {job.payload['file']}"

    ids = [enqueue(store, registry, "transcribe", payload={"file": n}) for n in range(3)]

    with runner(store, registry) as r:
        report = r.tick()

    assert [store.get(i).result for i in ids] == ["text of 0", "text of 1", "text of 2"]
    assert report.succeeded == 3


def test_a_permanent_error_sends_the_job_to_the_dead_letters_at_once(
    store: PostgresStore, registry: Registry
) -> None:
    @registry.task("embed", max_attempts=5)
    def embed(job: JobContext) -> None:
        raise PermanentError("document was deleted")

    job_id = enqueue(store, registry, "embed")

    with runner(store, registry) as r:
        report = r.tick()

    job = store.get(job_id)
    assert (job.status, job.attempts) == (Status.DEAD, 1)
    assert job.error == "PermanentError: document was deleted"
    assert report.dead == 1
    assert [d.id for d in report.dead_letters] == [job_id]


def test_retry_after_requeues_later_without_an_error_or_a_spent_attempt(
    store: PostgresStore, registry: Registry
) -> None:
    @registry.task("sync", max_attempts=2)
    def sync(job: JobContext) -> None:
        raise RetryAfter(120, "rate limited")

    job_id = enqueue(store, registry, "sync")

    with runner(store, registry) as r:
        report = r.tick()

    job = store.get(job_id)
    assert job.status == Status.QUEUED
    assert (job.attempts, job.max_attempts, job.snoozes) == (0, 2, 1)
    assert job.error is None and job.errors == []
    assert (job.run_after - job.updated_at).total_seconds() == pytest.approx(120)
    assert (report.snoozed, report.retried) == (1, 0)


def test_a_snoozed_job_that_never_failed_ends_with_its_declared_attempts(
    store: PostgresStore, registry: Registry
) -> None:
    # What a user read as 2/5 for a declared 4: the snooze counts as a snooze, not a run.
    runs: list[int] = []

    @registry.task("sync", max_attempts=4)
    def sync(job: JobContext) -> str:
        runs.append(job.attempt)
        if len(runs) < 3:
            raise RetryAfter(0, "rate limited")
        return "done"

    job_id = enqueue(store, registry, "sync")

    with runner(store, registry) as r:
        for _ in range(3):
            r.tick()

    job = store.get(job_id)
    assert job.status == Status.SUCCEEDED
    assert runs == [1, 1, 1]  # each run after a snooze is still the first attempt
    assert (job.attempts, job.max_attempts, job.snoozes) == (1, 4, 2)
    assert job.to_dict()["snoozes"] == 2


def test_an_exception_retries_after_backoff(store: PostgresStore, registry: Registry) -> None:
    @registry.task("flaky", max_attempts=3)
    def flaky(job: JobContext) -> None:
        raise ValueError("upstream said 503")

    job_id = enqueue(store, registry, "flaky")

    with runner(store, registry) as r:
        report = r.tick()

    job = store.get(job_id)
    assert job.status == Status.RETRYING
    assert job.error == "ValueError: upstream said 503"
    assert (job.run_after - job.updated_at).total_seconds() == pytest.approx(1.0)
    assert report.retried == 1


def test_an_exception_on_every_attempt_ends_dead_after_max_attempts(
    store: PostgresStore, registry: Registry
) -> None:
    calls: list[int] = []

    @registry.task("flaky", max_attempts=3, backoff=INSTANT)
    def flaky(job: JobContext) -> None:
        calls.append(job.attempt)
        raise ValueError(f"failure {job.attempt}")

    job_id = enqueue(store, registry, "flaky")

    with runner(store, registry) as r:
        reports = []
        while store.get(job_id).status != Status.DEAD and len(reports) < 50:
            reports.append(r.tick())
            time.sleep(0.005)

    job = store.get(job_id)
    assert calls == [1, 2, 3]
    assert (job.status, job.attempts, job.error) == (Status.DEAD, 3, "ValueError: failure 3")
    assert [e["error"] for e in job.errors] == [f"ValueError: failure {n}" for n in (1, 2, 3)]
    assert sum(r.retried for r in reports) == 2
    assert sum(r.dead for r in reports) == 1


def test_an_unknown_type_is_recorded_as_a_failure_not_a_crash(
    store: PostgresStore, registry: Registry
) -> None:
    @registry.task("embed")
    def embed(job: JobContext) -> int:
        return 1

    orphan = store.enqueue(Registry().spec("no-such-type", max_attempts=1)).id
    known = enqueue(store, registry, "embed")

    with runner(store, registry) as r:
        report = r.tick()

    job = store.get(orphan)
    assert job.status == Status.DEAD
    assert job.error is not None and "no handler registered for type 'no-such-type'" in job.error
    assert store.get(known).status == Status.SUCCEEDED
    assert (report.succeeded, report.dead) == (1, 1)


def test_a_handler_reports_progress_and_extends_its_lease(
    store: PostgresStore, registry: Registry, connect: Connect
) -> None:
    observer = PostgresStore(connect())
    seen: dict[str, Any] = {}

    @registry.task("long")
    def long(job: JobContext) -> str:
        job.progress({"pct": 50})
        job.extend_lease(3600)
        row = observer.get(job.id)
        seen["progress"] = row.progress
        assert row.lease_until is not None and row.started_at is not None
        seen["lease"] = (row.lease_until - row.started_at).total_seconds()
        return "done"

    job_id = enqueue(store, registry, "long")

    with runner(store, registry, lease_seconds=30) as r:
        r.tick()

    assert seen["progress"] == {"pct": 50}
    assert seen["lease"] >= 3600
    assert store.get(job_id).progress == {"pct": 50}


def test_a_cancel_while_running_reaches_the_handler_at_its_next_progress_call(
    store: PostgresStore, registry: Registry, connect: Connect
) -> None:
    operator = PostgresStore(connect())
    steps: list[int] = []

    @registry.task("long")
    def long(job: JobContext) -> None:
        for step in range(3):
            if step == 1:
                asked = operator.cancel(job.id)
                assert (asked.status, asked.cancel_requested) == (Status.RUNNING, True)
            job.progress(step)
            steps.append(step)

    job_id = enqueue(store, registry, "long")

    with runner(store, registry) as r:
        report = r.tick()

    job = store.get(job_id)
    assert steps == [0]
    assert (job.status, job.error, job.cancel_requested) == (
        Status.CANCELLED,
        "cancelled while running",
        False,
    )
    assert report.cancelled == 1


def test_the_report_counts_each_kind_of_outcome(store: PostgresStore, registry: Registry) -> None:
    @registry.task("ok")
    def ok(job: JobContext) -> int:
        return 1

    @registry.task("fails", max_attempts=2)
    def fails(job: JobContext) -> None:
        raise RuntimeError("boom")

    @registry.task("gives-up")
    def gives_up(job: JobContext) -> None:
        raise PermanentError("no")

    @registry.task("later")
    def later(job: JobContext) -> None:
        raise RetryAfter(60)

    for type_ in ("ok", "ok", "fails", "gives-up", "later"):
        enqueue(store, registry, type_)

    with runner(store, registry, batch_size=10) as r:
        report = r.tick()

    counts = (report.claimed, report.succeeded, report.retried, report.dead, report.snoozed)
    assert counts == (5, 2, 1, 1, 1)
    assert (report.batches, report.lost_leases, report.reclaimed) == (1, 0, 0)
    assert [d.type for d in report.dead_letters] == ["gives-up"]


def test_a_tick_runs_batches_until_the_queue_is_drained(
    store: PostgresStore, registry: Registry
) -> None:
    registry.task("ok")(lambda job: None)
    store.enqueue_many([registry.spec("ok") for _ in range(23)])

    with runner(store, registry, batch_size=5, concurrency=1) as r:
        report = r.tick()

    assert (report.claimed, report.succeeded, report.batches) == (23, 23, 5)


def test_a_streaming_tick_runs_until_the_queue_is_drained(
    store: PostgresStore, registry: Registry
) -> None:
    registry.task("ok")(lambda job: None)
    store.enqueue_many([registry.spec("ok") for _ in range(23)])

    with runner(store, registry, batch_size=5, concurrency=10) as r:
        report = r.tick()

    # Claims fill the free slots: a batch at first, then up to the jobs held ahead while
    # the calls are quick.
    assert (report.claimed, report.succeeded) == (23, 23)
    assert 2 <= report.batches <= 23


def test_a_tick_stops_after_max_batches(store: PostgresStore, registry: Registry) -> None:
    registry.task("ok")(lambda job: None)
    store.enqueue_many([registry.spec("ok") for _ in range(23)])

    with runner(store, registry, batch_size=5, concurrency=1) as r:
        report = r.tick(max_batches=2)

    assert (report.claimed, report.batches) == (10, 2)


def test_a_streaming_tick_stops_after_max_batches_claims(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    registry.task("ok")(lambda job: None)
    store.enqueue_many([registry.spec("ok") for _ in range(50)])

    with runner(store, registry, batch_size=5, concurrency=2) as r:
        report = r.tick(max_batches=1)

    # One claim (the two free slots), every job of it run and saved, nothing claimed after.
    assert (report.claimed, report.succeeded, report.batches) == (2, 2, 1)
    statuses = [s for (s,) in conn.execute("select status from tickq.jobs")]
    assert statuses.count("succeeded") == 2 and statuses.count("queued") == 48


def test_a_tick_reclaims_expired_leases_first(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    registry.task("ok", max_attempts=1)(lambda job: None)
    job_id = enqueue(store, registry, "ok")
    store.claim(lease_seconds=1)
    conn.execute(
        "update tickq.jobs set lease_until = now() - interval '1 second' where id = %s",
        (job_id,),
    )

    with runner(store, registry) as r:
        report = r.tick()

    assert (report.reclaimed, report.dead, report.claimed) == (1, 1, 0)
    assert store.get(job_id).error == "lease expired"


def test_handlers_run_outside_any_transaction(
    store: PostgresStore, registry: Registry, connect: Connect
) -> None:
    observer = PostgresStore(connect())
    seen: dict[str, Any] = {}

    @registry.task("check")
    def check(job: JobContext) -> None:
        seen["transaction"] = store.conn.info.transaction_status
        seen["status_seen_elsewhere"] = observer.get(job.id).status

    enqueue(store, registry, "check")

    with runner(store, registry) as r:
        r.tick()

    assert seen["transaction"] == TransactionStatus.IDLE
    assert seen["status_seen_elsewhere"] == Status.RUNNING


class Gauge:
    """Counts handlers running at once and remembers the peak."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1


def test_sync_handlers_run_at_most_concurrency_at_a_time(
    store: PostgresStore, registry: Registry
) -> None:
    gauge = Gauge()

    @registry.task("slow")
    def slow(job: JobContext) -> None:
        gauge.enter()
        time.sleep(0.05)
        gauge.leave()

    store.enqueue_many([registry.spec("slow") for _ in range(12)])

    with runner(store, registry, batch_size=12, concurrency=3) as r:
        report = r.tick()

    assert report.succeeded == 12
    assert 1 < gauge.peak <= 3


def test_async_handlers_run_at_most_concurrency_at_a_time(
    store: PostgresStore, registry: Registry
) -> None:
    gauge = Gauge()

    @registry.task("slow")
    async def slow(job: JobContext) -> None:
        gauge.enter()
        await asyncio.sleep(0.02)
        gauge.leave()

    store.enqueue_many([registry.spec("slow") for _ in range(12)])

    with runner(store, registry, batch_size=12, concurrency=3) as r:
        report = r.tick()

    assert report.succeeded == 12
    assert gauge.peak == 3


def test_a_result_postgres_cannot_store_fails_that_job_only(
    store: PostgresStore, registry: Registry
) -> None:
    @registry.task("odd", max_attempts=1)
    def odd(job: JobContext) -> dict[str, float]:
        return {"x": float("nan")}

    @registry.task("ok")
    def ok(job: JobContext) -> int:
        return 1

    odd_id = enqueue(store, registry, "odd")
    ok_id = enqueue(store, registry, "ok")

    with runner(store, registry) as r:
        report = r.tick()

    job = store.get(odd_id)
    assert job.status == Status.DEAD
    assert job.error is not None and "not JSON-serializable" in job.error
    assert store.get(ok_id).status == Status.SUCCEEDED
    assert (report.succeeded, report.dead) == (1, 1)
