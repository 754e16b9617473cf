"""Database faults mid-tick: each gives a clear error, the next tick recovers, nothing is lost.

Given a job whose handler triggers the fault, when the tick fails, then the error names the
cause, the job is still there (running under a lease that will expire), and a later tick on a
fresh connection reclaims it and runs it to the end.
"""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from queue_core import DatabaseError, JobContext, Registry, Runner, Status
from queue_core.model import validation
from queue_core.postgres import PostgresStore
from tests.conftest import Connect


def wait_for_lease_expiry(conn: psycopg.Connection, job_id: UUID) -> None:
    """Poll the database clock (the one leases are judged by) until the lease is over."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        row = conn.execute(
            "select lease_until is null or lease_until <= now() from tickq.jobs where id = %s",
            (job_id,),
        ).fetchone()
        if row and row[0]:
            return
        time.sleep(0.05)
    raise AssertionError("lease never expired")


def enqueue(conn: psycopg.Connection, type_: str) -> UUID:
    return PostgresStore(conn).enqueue(validation.job_spec(type_, {"x": 1})).id


def recover(conn: psycopg.Connection, registry: Registry, job_id: UUID) -> Any:
    """The next invocation: a fresh connection, a tick that reclaims and reruns the job."""
    wait_for_lease_expiry(conn, job_id)
    with Runner(PostgresStore(conn), registry, lease_seconds=1) as runner:
        for _ in range(20):
            runner.tick()
            job = PostgresStore(conn).get(job_id)
            if job.is_terminal:
                return job
            time.sleep(0.1)
    raise AssertionError("job never finished after the fault")


def test_connection_terminated_mid_tick_is_a_clear_error_and_the_next_tick_recovers(
    connect: Connect,
) -> None:
    admin, worker_conn = connect(), connect()
    registry = Registry()
    calls: list[int] = []

    @registry.task("drop-connection", max_attempts=3)
    def drop(job: JobContext) -> str:
        calls.append(job.attempt)
        if job.attempt == 1:
            admin.execute("select pg_terminate_backend(%s)", (worker_conn.info.backend_pid,))
        return "done"

    job_id = enqueue(admin, "drop-connection")

    runner = Runner(PostgresStore(worker_conn), registry, lease_seconds=1)
    with runner, pytest.raises(DatabaseError, match="terminat"):
        runner.tick()

    assert PostgresStore(admin).get(job_id).status == "running"
    job = recover(connect(), registry, job_id)
    assert (job.status, job.attempts, job.result, calls) == ("succeeded", 2, "done", [1, 2])


def test_statement_timeout_on_finish_is_a_clear_error_and_the_next_tick_recovers(
    connect: Connect, database_url: str
) -> None:
    admin = connect()
    locker = connect()
    registry = Registry()

    @registry.task("slow-finish", max_attempts=3)
    def hold(job: JobContext) -> str:
        if job.attempt == 1:
            # Someone else holds the row, so persisting the outcome waits past the timeout.
            locker.execute("begin")
            locker.execute("select 1 from tickq.jobs where id = %s for update", (job.id,))
        return "done"

    job_id = enqueue(admin, "slow-finish")
    timed = psycopg.connect(database_url, autocommit=True, options="-c statement_timeout=300")
    try:
        runner = Runner(PostgresStore(timed), registry, lease_seconds=1)
        with runner, pytest.raises(DatabaseError, match="statement timeout"):
            runner.tick()
        # The connection itself survives a timeout: the next statement on it works.
        assert timed.execute("select 1").fetchone() == (1,)
    finally:
        locker.execute("rollback")
        timed.close()

    job = recover(connect(), registry, job_id)
    assert (job.status, job.attempts) == ("succeeded", 2)


def test_concurrent_batch_enqueues_of_shared_keys_in_opposite_orders_never_deadlock(
    connect: Connect,
) -> None:
    """Batches inserting the same idempotency keys in different orders wait on each other's
    uncommitted keys: unless every batch takes its keys in one order, two batches can each
    hold the key the other needs."""
    threads, rounds, per_round = 4, 10, 300
    keys = [f"r{r}-k{i}" for r in range(rounds) for i in range(per_round)]
    errors: list[Exception] = []
    results: dict[str, set[UUID]] = {k: set() for k in keys}
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def enqueuer(seed: int) -> None:
        conn = connect()
        rng = random.Random(seed)
        for r in range(rounds):
            # Fresh keys each round, so every round races on uncommitted inserts.
            order = keys[r * per_round : (r + 1) * per_round]
            rng.shuffle(order)
            specs = [validation.job_spec("t", {}, idempotency_key=k) for k in order]
            start.wait(timeout=30)
            # Each batch in one transaction, like a caller enqueueing with its own writes.
            try:
                with conn.transaction():
                    found = PostgresStore(conn).enqueue_many(specs)
            except DatabaseError as exc:
                errors.append(exc)
                continue
            with lock:
                for spec, result in zip(specs, found, strict=True):
                    assert spec.idempotency_key is not None
                    results[spec.idempotency_key].add(result.id)

    workers = [threading.Thread(target=enqueuer, args=(seed,)) for seed in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)

    assert errors == []
    assert all(len(ids) == 1 for ids in results.values())
    count = connect().execute("select count(*) from tickq.jobs").fetchone()
    assert count == (len(keys),)


def test_claimers_reclaimers_and_finishers_racing_lose_nothing(connect: Connect) -> None:
    """Many connections claim, finish and reclaim the same backlog at once; every job ends
    succeeded exactly once. Whether a reclaim meets a finish here is left to chance: the two
    tests below force both orders."""
    admin = connect()
    store = PostgresStore(admin)
    store.enqueue_many([validation.job_spec("race", {"n": n}) for n in range(300)])
    accepted: list[UUID] = []
    errors: list[Exception] = []
    lock = threading.Lock()

    def worker() -> None:
        own = PostgresStore(connect())
        try:
            while True:
                own.reclaim()
                jobs = own.claim(limit=7, lease_seconds=1)
                if not jobs:
                    row = own.conn.execute(
                        "select count(*) from tickq.jobs where status <> 'succeeded'"
                    ).fetchone()
                    if row == (0,):
                        return
                    time.sleep(0.05)
                    continue
                outcomes = [_succeed(job) for job in jobs]
                held = own.finish(outcomes)
                with lock:
                    accepted.extend(held)
        except Exception as exc:  # collected: a thread must not die silently
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    assert len(accepted) == len(set(accepted)) == 300
    statuses = admin.execute("select status, count(*) from tickq.jobs group by 1").fetchall()
    assert statuses == [("succeeded", 300)]


def _succeed(job: Any) -> Any:
    from queue_core.model import transitions

    return transitions.succeeded(job, {"ok": True})


# Reclaim beside finish, in both orders, forced: one side holds the job's row in an open
# transaction while the other runs, with leases judged by an injected clock.
T0 = datetime(2030, 1, 1, tzinfo=UTC)


def leased_job(connect: Connect) -> Any:
    store = PostgresStore(connect())
    store.enqueue(validation.job_spec("race"), now=T0)
    (job,) = store.claim(lease_seconds=1, now=T0)
    return job


def test_a_reclaim_beside_a_finish_in_flight_skips_the_row_and_the_finish_stands(
    connect: Connect,
) -> None:
    job = leased_job(connect)
    finisher, reclaimer = connect(), connect()
    reclaimer.execute("set lock_timeout = '5s'")  # a reclaim that waited would fail, not hang

    with finisher.transaction():  # the finish has updated the row, not yet committed
        held = PostgresStore(finisher).finish([_succeed(job)], now=T0 + timedelta(seconds=0.5))
        assert held == {job.id}
        reclaimed = PostgresStore(reclaimer).reclaim(now=T0 + timedelta(seconds=5))
        assert reclaimed == []  # the lease is over by the clock, but the row is the finisher's

    after = PostgresStore(connect()).get(job.id)
    assert after.status == Status.SUCCEEDED and after.attempts == 1
    assert PostgresStore(connect()).reclaim(now=T0 + timedelta(seconds=5)) == []


def test_a_finish_beside_a_reclaim_in_flight_waits_for_it_then_is_refused(
    connect: Connect,
) -> None:
    job = leased_job(connect)
    reclaimer, finisher, observer = connect(), connect(), connect()
    answers: list[set[UUID]] = []

    def finish() -> None:
        answers.append(PostgresStore(finisher).finish([_succeed(job)]))

    with reclaimer.transaction():  # the reclaim has taken the row, not yet committed
        (reclaimed,) = PostgresStore(reclaimer).reclaim(now=T0 + timedelta(seconds=5))
        assert reclaimed.status == Status.RETRYING
        late = threading.Thread(target=finish)
        late.start()
        waiting_for_lock(observer, finisher.info.backend_pid)  # the interleaving happened
        assert answers == []

    late.join(timeout=30)
    assert answers == [set()]  # its lease was gone when the row came free: refused
    after = PostgresStore(connect()).get(job.id)
    assert after.status == Status.RETRYING and after.error == "lease expired"


def waiting_for_lock(observer: psycopg.Connection, pid: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        row = observer.execute(
            "select wait_event_type from pg_stat_activity where pid = %s", (pid,)
        ).fetchone()
        if row and row[0] == "Lock":
            return
        time.sleep(0.02)
    raise AssertionError(f"backend {pid} never waited for the row lock")
