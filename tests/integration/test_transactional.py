"""Transactional completion against a real database: a transactional handler's writes and
its job's fenced success commit together or not at all, `complete_in` on a caller's own
connection, a lost lease rolling the handler's writes back, and the connections used."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from queue_core import (
    ConfigurationError,
    JobContext,
    LeaseLost,
    PermanentError,
    PostgresStore,
    Registry,
    Runner,
    Status,
    StepStore,
    complete_in,
)
from queue_core.postgres.transactional import HandlerConnections

Connect = Callable[[], psycopg.Connection]
INSTANT = {"base": 0.001, "max": 0.001}


@pytest.fixture
def store(conn: psycopg.Connection) -> Iterator[PostgresStore]:
    conn.execute("create table if not exists public.charges (job_id uuid, attempt int)")
    conn.execute("truncate public.charges")
    yield PostgresStore(conn)


@pytest.fixture
def registry() -> Registry:
    return Registry()


def charge_rows(conn: psycopg.Connection, job_id: UUID) -> list[int]:
    rows = conn.execute(
        "select attempt from public.charges where job_id = %s order by attempt", (job_id,)
    ).fetchall()
    return [attempt for (attempt,) in rows]


def charge(job: JobContext, conn: psycopg.Connection) -> None:
    conn.execute("insert into public.charges values (%s, %s)", (job.id, job.attempt))


def test_a_transactional_handlers_row_and_its_jobs_success_commit_together(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    @registry.task("charge", transactional=True)
    def handler(job: JobContext, tx: psycopg.Connection) -> dict[str, int]:
        charge(job, tx)
        return {"charged": 1}

    job_id = store.enqueue(registry.spec("charge")).id
    with Runner(store, registry) as runner:
        report = runner.tick()

    job = store.get(job_id)
    assert (job.status, job.result, job.attempts) == (Status.SUCCEEDED, {"charged": 1}, 1)
    assert charge_rows(conn, job_id) == [1]
    assert (report.succeeded, report.lost_leases) == (1, 0)
    view = StepStore(store).show(job_id)
    assert view.completed_in_transaction
    assert view.handling() == ["completed in the handler's transaction"]


def test_a_plain_job_is_not_shown_as_completed_in_a_transaction(
    store: PostgresStore, registry: Registry
) -> None:
    registry.task("plain")(lambda job: None)
    job_id = store.enqueue(registry.spec("plain")).id
    with Runner(store, registry) as runner:
        runner.tick()

    view = StepStore(store).show(job_id)
    assert (view.completed_in_transaction, view.batch_id, view.handling()) == (False, None, [])


def test_a_raising_transactional_handler_rolls_its_row_back_and_retries(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    @registry.task("charge", transactional=True, backoff=INSTANT)
    def handler(job: JobContext, tx: psycopg.Connection) -> None:
        charge(job, tx)
        if job.attempt == 1:
            raise RuntimeError("card declined")

    job_id = store.enqueue(registry.spec("charge")).id
    with Runner(store, registry) as runner:
        first = runner.tick(max_batches=1)
        after_first = store.get(job_id)
        assert charge_rows(conn, job_id) == []
        runner.tick()

    assert (after_first.status, after_first.error) == (
        Status.RETRYING,
        "RuntimeError: card declined",
    )
    assert first.retried == 1
    job = store.get(job_id)
    assert (job.status, job.attempts) == (Status.SUCCEEDED, 2)
    assert charge_rows(conn, job_id) == [2]


def test_a_handler_that_completes_itself_is_not_completed_twice(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    @registry.task("charge", transactional=True)
    def handler(job: JobContext, tx: psycopg.Connection) -> str:
        charge(job, tx)
        complete_in(tx, job, {"receipt": "r-1"})
        return "ignored: the completion above stored its own result"

    job_id = store.enqueue(registry.spec("charge")).id
    with Runner(store, registry) as runner:
        report = runner.tick()

    job = store.get(job_id)
    assert (job.status, job.result) == (Status.SUCCEEDED, {"receipt": "r-1"})
    assert (report.succeeded, report.retried, report.lost_leases) == (1, 0, 0)
    assert charge_rows(conn, job_id) == [1]


def test_a_handler_whose_lease_was_taken_over_cannot_commit_its_row(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection, connect: Connect
) -> None:
    """The job's lease expires while the handler runs and another worker claims it again:
    the first handler's completion fails, and its row rolls back with it."""
    other = PostgresStore(connect())
    taken = threading.Event()

    @registry.task("charge", transactional=True, lease_seconds=1)
    def handler(job: JobContext, tx: psycopg.Connection) -> None:
        charge(job, tx)
        if job.attempt == 1:
            # Another worker: the expired lease is reclaimed and the job claimed again.
            later = other.now() + timedelta(days=1)
            assert other.reclaim(now=later)
            again = other.claim(limit=1, now=later + timedelta(days=1))
            assert [j.id for j in again] == [job.id]
            taken.set()

    job_id = store.enqueue(registry.spec("charge")).id
    with Runner(store, registry) as runner:
        report = runner.tick(max_batches=1)

    assert taken.is_set()
    assert report.succeeded == 0
    job = store.get(job_id)
    assert (job.status, job.attempts) == (Status.RUNNING, 2)  # the newer attempt, untouched
    assert charge_rows(conn, job_id) == []
    assert not StepStore(store).show(job_id).completed_in_transaction


def test_complete_in_succeeds_a_claimed_job_in_the_callers_transaction(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection, connect: Connect
) -> None:
    job_id = store.enqueue(registry.spec("charge")).id
    [job] = store.claim(limit=1)
    mine = connect()

    with mine.transaction():
        mine.execute("insert into public.charges values (%s, 1)", (job_id,))
        outcome = complete_in(mine, job, {"ok": True})
        # Nothing is visible outside the transaction until it commits.
        assert store.get(job_id).status == Status.RUNNING

    assert outcome.in_transaction
    assert (store.get(job_id).status, store.get(job_id).result) == (Status.SUCCEEDED, {"ok": True})
    assert charge_rows(conn, job_id) == [1]


def test_complete_in_with_a_stale_lease_raises_and_the_caller_rolls_back(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection, connect: Connect
) -> None:
    job_id = store.enqueue(registry.spec("charge")).id
    [job] = store.claim(limit=1)
    store.finish([Runner(store, registry).run_one(job, None)])  # another attempt ended it
    mine = connect()

    with pytest.raises(LeaseLost), mine.transaction():
        mine.execute("insert into public.charges values (%s, 1)", (job_id,))
        complete_in(mine, job)

    assert charge_rows(conn, job_id) == []
    assert store.get(job_id).status == Status.RETRYING


@pytest.mark.parametrize(
    ("result", "message"),
    [(float("nan"), "result"), ({"x": "\x00"}, "result")],
)
def test_complete_in_refuses_a_result_that_is_not_json_and_changes_nothing(
    store: PostgresStore, registry: Registry, connect: Connect, result: Any, message: str
) -> None:
    job_id = store.enqueue(registry.spec("charge")).id
    [job] = store.claim(limit=1)
    mine = connect()

    with pytest.raises(Exception, match=message), mine.transaction():
        complete_in(mine, job, result)

    assert store.get(job_id).status == Status.RUNNING


def test_complete_in_refuses_an_autocommit_connection_outside_a_transaction(
    store: PostgresStore, registry: Registry, connect: Connect
) -> None:
    job_id = store.enqueue(registry.spec("charge")).id
    [job] = store.claim(limit=1)

    with pytest.raises(ConfigurationError, match="open transaction"):
        complete_in(connect(), job)

    assert store.get(job_id).status == Status.RUNNING


def test_concurrent_transactional_handlers_each_hold_a_connection_of_their_own(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    """Four handlers at a time, eight jobs: at most four extra connections, each one's
    transaction its own backend."""
    backends: set[int] = set()
    inside = threading.Barrier(4, timeout=10)

    @registry.task("charge", transactional=True)
    def handler(job: JobContext, tx: psycopg.Connection) -> None:
        charge(job, tx)
        backends.add(tx.info.backend_pid)
        if job.payload["wave"] == 0:
            inside.wait()  # all four transactions open at once

    for i in range(8):
        store.enqueue(registry.spec("charge", {"wave": i // 4}, priority=8 - i))
    with Runner(store, registry, batch_size=4, concurrency=4) as runner:
        report = runner.tick()
        opened = runner._transactions.opened  # type: ignore[union-attr]

    assert report.succeeded == 8
    assert opened == 4
    assert len(backends) == 4
    assert conn.execute("select count(*) from public.charges").fetchone() == (8,)


def test_a_handler_connection_that_died_while_idle_is_replaced_before_its_next_job(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    """A server restart (or a pooler) ends the idle handler connection unseen: the next
    transactional job runs on a fresh one, once, at its first attempt, not failed for it."""
    backends: list[int] = []

    @registry.task("charge", transactional=True)
    def handler(job: JobContext, tx: psycopg.Connection) -> None:
        charge(job, tx)
        backends.append(tx.info.backend_pid)

    first = store.enqueue(registry.spec("charge")).id
    with Runner(store, registry) as runner:
        runner.tick()
        conn.execute("select pg_terminate_backend(%s)", (backends[0],))
        second = store.enqueue(registry.spec("charge")).id
        report = runner.tick()

    assert (report.succeeded, report.retried) == (1, 0)
    assert [store.get(j).attempts for j in (first, second)] == [1, 1]
    assert store.get(second).status == Status.SUCCEEDED
    assert charge_rows(conn, second) == [1] and backends[1] != backends[0]


def test_a_handler_whose_connection_is_refused_for_its_whole_lease_leaves_its_job_to_the_reclaim(
    store: PostgresStore, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handler never ran: its worker reports nothing (a lost lease in the tick's
    report), so the job's lease ends when it expires, by the reclaim, as a lost worker's
    would, instead of early, failed for an error its handler never met."""
    ran: list[UUID] = []

    @registry.task("charge", transactional=True, lease_seconds=1)
    def handler(job: JobContext, tx: psycopg.Connection) -> None:
        ran.append(job.id)

    def refuse() -> psycopg.Connection:
        raise psycopg.OperationalError("connection refused")

    monkeypatch.setattr(store, "handler_transactions", lambda: HandlerConnections(refuse))
    job_id = store.enqueue(registry.spec("charge")).id
    with Runner(store, registry) as runner:
        report = runner.tick()

    assert (report.lost_leases, report.retried, ran) == (1, 0, [])
    held = store.get(job_id)
    assert (held.status, held.attempts, held.error) == (Status.RUNNING, 1, None)
    assert held.lease_until is not None
    (reclaimed,) = store.reclaim(now=held.lease_until + timedelta(seconds=1))
    assert (reclaimed.status, reclaimed.error) == (Status.RETRYING, "lease expired")


def test_a_handler_whose_connection_is_lost_in_its_transaction_leaves_its_job_to_the_reclaim(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    """Whether a transaction whose connection died committed is the database's to know: the
    worker reports nothing, and the reclaim retries the job once its lease expires (its
    charge rolled back with the connection), rather than the worker failing it early."""

    @registry.task("charge", transactional=True, lease_seconds=30)
    def handler(job: JobContext, tx: psycopg.Connection) -> None:
        charge(job, tx)
        conn.execute("select pg_terminate_backend(%s)", (tx.info.backend_pid,))

    job_id = store.enqueue(registry.spec("charge")).id
    with Runner(store, registry) as runner:
        report = runner.tick()

    assert (report.lost_leases, report.retried, report.succeeded) == (1, 0, 0)
    held = store.get(job_id)
    assert (held.status, held.attempts, charge_rows(conn, job_id)) == (Status.RUNNING, 1, [])
    assert held.lease_until is not None
    (reclaimed,) = store.reclaim(now=held.lease_until + timedelta(seconds=1))
    assert (reclaimed.status, reclaimed.error) == (Status.RETRYING, "lease expired")


def test_a_transactional_saga_that_fails_for_good_runs_its_undos_before_it_ends_dead(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    """Its transaction rolled back, the steps it stored (on the worker's connection, so
    kept) are undone as a plain handler's would be, then the job ends dead."""
    undone: list[int] = []

    @registry.task("book", transactional=True)
    def handler(job: JobContext, tx: psycopg.Connection) -> None:
        charge(job, tx)
        job.step("reserve", lambda: {"seat": 7}, undo=lambda r: undone.append(r["seat"]))
        raise PermanentError("card declined")

    job_id = store.enqueue(registry.spec("book")).id
    with Runner(store, registry) as runner:
        report = runner.tick()

    assert (report.dead, undone, charge_rows(conn, job_id)) == (1, [7], [])
    ended = store.get(job_id)
    assert (ended.status, ended.error) == (Status.DEAD, "PermanentError: card declined")


def test_a_transactional_handler_cannot_be_async_or_batched() -> None:
    registry = Registry()

    async def handler(job: JobContext, conn: Any) -> None:
        return None

    with pytest.raises(ConfigurationError, match="plain functions"):
        registry.task("a", transactional=True)(handler)
    with pytest.raises(ConfigurationError, match="both transactional and batched"):
        registry.task("b", transactional=True, batch_size=5)
    assert registry.names() == []
