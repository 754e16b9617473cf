"""Outcomes survive a lost connection: the runner keeps what a failed statement did not
persist and sends it again, fenced by the lease tokens, on the connection its `reconnect`
opens. The connection is lost for real: a handler has the worker's backend terminated."""

from __future__ import annotations

import threading
from collections import Counter
from uuid import UUID

import psycopg
import pytest

from queue_core import DatabaseError, JobContext, Registry, Runner
from queue_core.model import validation
from queue_core.postgres import PostgresStore
from queue_core.runner import pipeline as pipeline_module
from queue_core.store.port import Store
from tests.conftest import Connect
from tests.faults.backends import terminated_while_writing_live_jobs
from tests.faults.test_database_faults import wait_for_lease_expiry
from tests.otel_sdk import otel_on


def terminate(admin: psycopg.Connection, worker: psycopg.Connection) -> None:
    admin.execute("select pg_terminate_backend(%s)", (worker.info.backend_pid,))


def enqueue(admin: psycopg.Connection, count: int) -> list[UUID]:
    specs = [validation.job_spec("work", {"n": n}) for n in range(count)]
    return [result.id for result in PostgresStore(admin).enqueue_many(specs)]


def attempts(admin: psycopg.Connection) -> Counter[tuple[str, int]]:
    rows = admin.execute("select status, attempts from tickq.jobs").fetchall()
    return Counter((status, n) for status, n in rows)


def test_a_batch_whose_persist_died_with_the_connection_finishes_once_on_the_next(
    connect: Connect,
) -> None:
    admin, worker = connect(), connect()
    registry = Registry()
    calls: Counter[UUID] = Counter()

    @registry.task("work")
    def work(job: JobContext) -> str:
        calls[job.id] += 1
        if len(calls) == 1:
            terminate(admin, worker)  # the batch's persist meets a dead connection
        return "done"

    ids = enqueue(admin, 3)
    fresh: list[PostgresStore] = []

    def reconnect() -> Store:
        fresh.append(PostgresStore(connect()))
        return fresh[-1]

    with Runner(PostgresStore(worker), registry, batch_size=3, concurrency=1) as runner:
        report = runner.tick(reconnect=reconnect)

    assert len(fresh) == 1
    assert calls == Counter({job_id: 1 for job_id in ids})
    assert attempts(admin) == Counter({("succeeded", 1): 3})
    assert (report.succeeded, report.lost_leases) == (3, 0)
    assert runner.pipeline.settled


@pytest.mark.parametrize("traced", [False, True], ids=["plain", "opentelemetry on"])
def test_the_in_flight_statements_batches_are_sent_again_too(
    connect: Connect,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    traced: bool,
) -> None:
    """With the overlap on, every persist is the statement in flight beside the next batch's
    handlers: the connection dies under it, and both batches it carried survive. Traced,
    the batch's read of its trace contexts meets the dead connection first, and must not
    cost the batch its run."""
    monkeypatch.setattr(pipeline_module, "OVERLAP_MIN_SECONDS", 0.0)
    if traced:
        otel = otel_on(monkeypatch)
        next(otel)
        request.addfinalizer(lambda: next(otel, None))
    admin, worker = connect(), connect()
    registry = Registry()
    calls: Counter[UUID] = Counter()
    in_flight_seen = threading.Event()

    @registry.task("work")
    def work(job: JobContext) -> str:
        calls[job.id] += 1
        if len(calls) == 5:  # the third batch: a statement is in flight beside it
            terminate(admin, worker)
            in_flight_seen.set()
        return "done"

    ids = enqueue(admin, 10)

    with Runner(PostgresStore(worker), registry, batch_size=2, concurrency=1) as runner:
        report = runner.tick(reconnect=lambda: PostgresStore(connect()))

    assert in_flight_seen.is_set()
    assert calls == Counter({job_id: 1 for job_id in ids})
    assert attempts(admin) == Counter({("succeeded", 1): 10})
    assert (report.succeeded, report.lost_leases) == (10, 0)


def test_an_outcome_whose_lease_was_lost_meanwhile_is_dropped_not_written(
    connect: Connect,
) -> None:
    """While the worker was away its job's lease expired, reclaim retried it and another
    worker holds it now: the resent outcome is refused by its lease token and logged as a
    lost lease, and the other worker's attempt is left alone."""
    admin, worker = connect(), connect()
    registry = Registry()
    calls: list[int] = []

    @registry.task("work")
    def work(job: JobContext) -> str:
        calls.append(job.attempt)
        terminate(admin, worker)
        wait_for_lease_expiry(admin, job.id)
        PostgresStore(admin).reclaim()
        admin.execute("update tickq.jobs set run_after = now() where id = %s", (job.id,))
        (taken,) = PostgresStore(admin).claim(lease_seconds=60)
        assert taken.id == job.id
        return "done"

    (job_id,) = enqueue(admin, 1)

    with Runner(PostgresStore(worker), registry, lease_seconds=1) as runner:
        report = runner.tick(reconnect=lambda: PostgresStore(connect()))

    assert calls == [1]
    assert (report.succeeded, report.lost_leases) == (0, 1)
    job = PostgresStore(admin).get(job_id)
    assert (job.status, job.attempts, job.result) == ("running", 2, None)


def test_without_reconnect_a_lost_connection_still_ends_the_tick_with_its_error(
    connect: Connect,
) -> None:
    admin, worker = connect(), connect()
    registry = Registry()

    @registry.task("work")
    def work(job: JobContext) -> None:
        terminate(admin, worker)

    enqueue(admin, 1)
    with (
        Runner(PostgresStore(worker), registry) as runner,
        pytest.raises(DatabaseError, match="termin"),
    ):
        runner.tick()
    assert runner.pipeline.owed  # kept, for a caller that reconnects


def test_a_ticks_reclaim_whose_connection_died_runs_again_on_the_next(
    connect: Connect,
) -> None:
    """The tick's first statement, the reclaim pass, dies with its backend while it runs:
    the tick reconnects, reclaims the expired lease and then runs the job, once."""
    admin, worker = connect(), connect()
    registry, calls = Registry(), Counter[UUID]()
    registry.task("work")(lambda job: calls.update([job.id]))

    # Given a job whose lease expired (its worker crashed), retryable at once
    (job_id,) = enqueue(admin, 1)
    admin.execute(
        "update tickq.jobs set status = 'running', attempts = 1, lease_token = gen_random_uuid(),"
        " lease_until = now() - interval '1 minute', backoff_base = 0.001,"
        " backoff_max = 0.001 where id = %s",
        (job_id,),
    )
    fresh: list[PostgresStore] = []

    def reconnect() -> Store:
        fresh.append(PostgresStore(connect()))
        return fresh[-1]

    # When a tick starts and its reclaim statement's backend is terminated mid-statement
    with (
        terminated_while_writing_live_jobs(connect, worker.info.backend_pid) as terminated,
        Runner(PostgresStore(worker), registry) as runner,
    ):
        report = runner.tick(reconnect=reconnect)

    # Then the reclaim ran again on the new connection, and the job after it, once
    assert terminated.is_set() and len(fresh) == 1
    assert (report.reclaimed, report.succeeded) == (1, 1)
    assert calls == {job_id: 1}
    job = PostgresStore(admin).get(job_id)
    assert (job.status, job.attempts) == ("succeeded", 2)
