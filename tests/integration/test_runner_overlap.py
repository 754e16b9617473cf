"""The overlapped runner: while batches are quick, the statement that persists one batch and
leases the next runs on a background thread beside the handlers of the batch in between.
Every outcome must still land exactly once, fenced by its lease, and nothing may be leased
ahead while batches are slow."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any
from uuid import UUID

import psycopg
import pytest

from queue_core import JobContext, PostgresStore, Registry, RetryAfter, Runner, Status
from queue_core.runner import pipeline as pipeline_module

INSTANT = {"base": 0.001, "max": 0.001}


@pytest.fixture
def store(conn: psycopg.Connection) -> PostgresStore:
    return PostgresStore(conn)


def statuses(conn: psycopg.Connection) -> Counter[str]:
    return Counter(status for (status,) in conn.execute("select status from tickq.jobs"))


def test_a_long_drain_persists_every_kind_of_outcome_exactly_once(
    store: PostgresStore, conn: psycopg.Connection
) -> None:
    registry = Registry()
    runs: Counter[UUID] = Counter()

    @registry.task("mixed", backoff=INSTANT, max_attempts=1)
    def mixed(job: JobContext) -> Any:
        runs[job.id] += 1
        kind = job.payload["n"] % 4
        if kind == 1:
            return {"n": job.payload["n"]}
        if kind == 2:
            raise ValueError("boom")
        if kind == 3 and job.attempt == 1:
            raise RetryAfter(3600)
        return None

    store.enqueue_many([registry.spec("mixed", payload={"n": n}) for n in range(230)])

    with Runner(store, registry, batch_size=10, concurrency=1, rand=lambda: 0.0) as runner:
        report = runner.tick()

    assert len(runs) == 230 and set(runs.values()) == {1}
    assert (report.claimed, report.batches) == (230, 23)
    assert (report.succeeded, report.dead, report.snoozed) == (116, 57, 57)
    assert report.lost_leases == 0
    assert statuses(conn) == {"succeeded": 116, "dead": 57, "queued": 57}
    results = dict(
        conn.execute(
            "select (payload->>'n')::int, result from tickq.jobs where status = 'succeeded'"
        ).fetchall()
    )
    assert all(results[n] == ({"n": n} if n % 4 == 1 else None) for n in results)
    assert runner.pipeline.settled


def test_an_outcome_whose_lease_was_lost_meanwhile_is_refused_and_counted(
    store: PostgresStore, conn: psycopg.Connection, connect: Any
) -> None:
    """The outcome of a batch rides on the next batch's statement; if the lease was taken
    away in between (an operator's reclaim, a lease expiry), the fence still refuses it."""
    registry = Registry()
    other = connect()

    @registry.task("t")
    def handler(job: JobContext) -> None:
        if job.payload["n"] == 15:  # its lease is taken away while it runs
            other.execute(
                "update tickq.jobs set lease_token = gen_random_uuid() where id = %s",
                (job.id,),
            )

    store.enqueue_many([registry.spec("t", payload={"n": n}) for n in range(40)])
    with Runner(store, registry, batch_size=10, concurrency=1) as runner:
        report = runner.tick()

    assert (report.claimed, report.succeeded, report.lost_leases) == (40, 39, 1)
    assert statuses(conn) == {"succeeded": 39, "running": 1}


def running_while_draining(
    store: PostgresStore, observer: psycopg.Connection, jobs: int
) -> list[int]:
    """Drain `jobs` jobs in batches of 5; each handler counts the jobs leased at that moment
    (after a pause long enough for the statement beside its batch to commit)."""
    registry = Registry()
    running: list[int] = []

    @registry.task("t")
    def handler(job: JobContext) -> None:
        time.sleep(0.02)
        (count,) = observer.execute(
            "select count(*) from tickq.jobs where status = 'running'"
        ).fetchone()
        running.append(count)

    store.enqueue_many([registry.spec("t") for _ in range(jobs)])
    with Runner(store, registry, batch_size=5, concurrency=1) as runner:
        assert runner.tick().succeeded == jobs
    return running


def test_slow_batches_lease_nothing_ahead(
    store: PostgresStore, connect: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job leased ahead waits for the batch before it, so only quick batches do that."""
    monkeypatch.setattr(pipeline_module, "QUICK_BATCH_SECONDS", 0.0)
    assert max(running_while_draining(store, connect(), 30)) == 5


def test_quick_batches_lease_one_batch_ahead_and_no_more(
    store: PostgresStore, connect: Any
) -> None:
    running = running_while_draining(store, connect(), 50)
    # The batch being run, plus at most the one leased beside it (while its statement runs
    # the previous batch's five still read as running too).
    assert max(running) <= 15
    assert max(running) > 5  # it did overlap


def test_an_interrupt_in_a_handler_waits_for_the_statement_in_flight(
    store: PostgresStore, conn: psycopg.Connection
) -> None:
    registry = Registry()
    seen = 0

    @registry.task("t")
    def handler(job: JobContext) -> None:
        nonlocal seen
        seen += 1
        if seen == 25:
            raise KeyboardInterrupt

    store.enqueue_many([registry.spec("t") for _ in range(40)])
    runner = Runner(store, registry, batch_size=10, concurrency=1)
    with runner, pytest.raises(KeyboardInterrupt):
        runner.tick()

    # The connection is idle and usable: no statement was left running on it.
    assert conn.execute("select 1").fetchone() == (1,)
    counts = statuses(conn)
    assert counts["succeeded"] >= 10 and sum(counts.values()) == 40


def test_work_persists_the_last_outcomes_when_stopped(
    store: PostgresStore, conn: psycopg.Connection
) -> None:
    registry = Registry()
    stop = threading.Event()
    done = 0

    @registry.task("t")
    def handler(job: JobContext) -> None:
        nonlocal done
        done += 1
        if done == 60:
            stop.set()

    store.enqueue_many([registry.spec("t") for _ in range(100)])
    with Runner(store, registry, batch_size=10, concurrency=1) as runner:
        report = runner.work(stop=stop, poll_interval=0.01, listen=False)

    counts = statuses(conn)
    # Stopped after the batch holding job 60; the batch leased ahead still ran.
    assert counts["running"] == 0
    assert counts["succeeded"] == report.succeeded
    assert report.succeeded in (60, 70)
    assert counts[Status.QUEUED.value] == 100 - report.succeeded


def test_handlers_use_the_connection_while_the_batch_statement_runs(
    store: PostgresStore, conn: psycopg.Connection
) -> None:
    """Progress and lease extensions share the worker's connection with the statement in
    flight beside them: they wait their turn on it and land."""
    registry = Registry()

    @registry.task("t")
    def handler(job: JobContext) -> None:
        job.progress({"n": job.payload["n"]})
        job.extend_lease(120)

    store.enqueue_many([registry.spec("t", payload={"n": n}) for n in range(60)])
    with Runner(store, registry, batch_size=5, concurrency=1) as runner:
        report = runner.tick()

    assert (report.succeeded, report.lost_leases) == (60, 0)
    rows = conn.execute("select payload, progress from tickq.jobs").fetchall()
    assert all(progress == {"n": payload["n"]} for payload, progress in rows)
