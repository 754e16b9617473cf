"""Lifecycle events of transactional handlers against a real database: a success committed in
the handler's transaction writes the events its task opted into in that transaction, a
transaction that rolls back writes none, the failures finished the ordinary way write
what a plain handler's would, and a task that opts into nothing writes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from queue_core import (
    JobContext,
    PermanentError,
    PostgresStore,
    Registry,
    RetryAfter,
    Runner,
    Status,
    complete_in,
)

Connect = Callable[[], psycopg.Connection]
INSTANT = {"base": 0.001, "max": 0.001}
EVERY_EVENT = ["succeeded", "retrying", "cancelled"]


@pytest.fixture
def store(conn: psycopg.Connection) -> Iterator[PostgresStore]:
    conn.execute("create table if not exists public.charges (job_id uuid, attempt int)")
    conn.execute("truncate public.charges")
    yield PostgresStore(conn)


def events(conn: psycopg.Connection, job_id: UUID | None = None) -> list[tuple[UUID, str]]:
    rows = conn.execute(
        "select job_id, detail_type from tickq.outbox"
        " where %(job)s::uuid is null or job_id = %(job)s::uuid order by id",
        {"job": job_id},
    ).fetchall()
    return [(j, t) for j, t in rows]


def charge(job: JobContext, tx: psycopg.Connection) -> None:
    tx.execute("insert into public.charges values (%s, %s)", (job.id, job.attempt))


def drain(store: PostgresStore, registry: Registry) -> None:
    with Runner(store, registry, concurrency=1) as runner:
        for _ in range(20):
            runner.tick()
            if not any(
                row.count for row in store.stats() if row.status.value in ("queued", "retrying")
            ):
                return


@pytest.mark.parametrize("completes", ["runner", "handler"])
def test_a_transactional_success_writes_one_job_succeeded_event_in_the_handlers_transaction(
    store: PostgresStore, conn: psycopg.Connection, completes: str
) -> None:
    """Whether the runner completes the job after the handler returns or the handler calls
    complete_in itself, the event is written once, by the transaction that wrote the
    handler's row (the same transaction id) and the job's success."""
    registry = Registry()

    @registry.task("charge", transactional=True, events=["succeeded"])
    def handler(job: JobContext, tx: psycopg.Connection) -> dict[str, int] | None:
        charge(job, tx)
        if completes == "handler":
            complete_in(tx, job, {"charged": 1})
            return None
        return {"charged": 1}

    job_id = store.enqueue(registry.spec("charge")).id
    with Runner(store, registry) as runner:
        report = runner.tick()

    assert report.succeeded == 1
    job = store.get(job_id)
    assert (job.status, job.result) == (Status.SUCCEEDED, {"charged": 1})
    assert events(conn) == [(job_id, "Job Succeeded")]
    detail = conn.execute("select detail from tickq.outbox").fetchone()
    assert detail == (
        {
            "id": str(job_id),
            "type": "charge",
            "queue": "default",
            "attempts": 1,
            "max_attempts": 3,
            "compensation_runs": 0,
            "error": None,
        },
    )
    [(event_tx, charge_tx, job_tx)] = conn.execute(
        "select (select xmin::text from tickq.outbox), (select xmin::text from public.charges),"
        " (select xmin::text from tickq.jobs where id = %s)",
        (job_id,),
    ).fetchall()
    assert event_tx == charge_tx == job_tx


def test_a_completion_whose_transaction_rolls_back_writes_no_event(
    store: PostgresStore, conn: psycopg.Connection
) -> None:
    """The handler completes its job, then raises: its row, the success and the event all
    roll back, and the retry that succeeds writes the one event."""
    registry = Registry()

    @registry.task("charge", transactional=True, events=["succeeded"], backoff=INSTANT)
    def handler(job: JobContext, tx: psycopg.Connection) -> None:
        charge(job, tx)
        complete_in(tx, job, {"attempt": job.attempt})
        assert events(tx, job.id) == [(job.id, "Job Succeeded")]  # in the open transaction
        if job.attempt == 1:
            raise RuntimeError("the ledger refused the row")

    job_id = store.enqueue(registry.spec("charge")).id
    with Runner(store, registry) as runner:
        runner.tick(max_batches=1)
        assert store.get(job_id).status == Status.RETRYING
        assert events(conn) == []
        runner.tick()

    job = store.get(job_id)
    assert (job.status, job.attempts, job.result) == (Status.SUCCEEDED, 2, {"attempt": 2})
    assert events(conn) == [(job_id, "Job Succeeded")]


def test_a_completion_whose_commit_fails_writes_no_event(
    store: PostgresStore, conn: psycopg.Connection
) -> None:
    """The handler returns and the runner completes the job, but the commit itself fails (a
    deferred constraint of the handler's table): no event of that success, the job is
    retried the ordinary way, and its later success writes the one event."""
    conn.execute(
        """
        create or replace function public.charges_refuse_first() returns trigger
            language plpgsql as $$
        begin
            if new.attempt = 1 then raise exception 'charge refused at commit'; end if;
            return new;
        end $$;
        drop trigger if exists charges_refuse_first on public.charges;
        create constraint trigger charges_refuse_first after insert on public.charges
            deferrable initially deferred for each row
            execute function public.charges_refuse_first();
        """
    )
    registry = Registry()

    @registry.task("charge", transactional=True, events=["succeeded"], backoff=INSTANT)
    def handler(job: JobContext, tx: psycopg.Connection) -> None:
        charge(job, tx)

    try:
        job_id = store.enqueue(registry.spec("charge")).id
        with Runner(store, registry) as runner:
            runner.tick(max_batches=1)
            after_first = store.get(job_id)
            assert events(conn) == []
            runner.tick()
    finally:
        conn.execute("drop trigger charges_refuse_first on public.charges")

    assert after_first.status == Status.RETRYING
    assert "charge refused at commit" in (after_first.error or "")
    assert store.get(job_id).status == Status.SUCCEEDED
    assert events(conn) == [(job_id, "Job Succeeded")]


def test_a_handler_whose_lease_was_taken_over_writes_no_event(
    store: PostgresStore, conn: psycopg.Connection, connect: Connect
) -> None:
    """The completion finds another attempt holding the job: LeaseLost rolls everything
    back, and the lost attempt's outcome changes nothing, so no event of either kind."""
    other = PostgresStore(connect())
    registry = Registry()

    @registry.task("charge", transactional=True, lease_seconds=1, events=EVERY_EVENT)
    def handler(job: JobContext, tx: psycopg.Connection) -> None:
        charge(job, tx)
        later = other.now() + timedelta(days=1)
        assert other.reclaim(now=later)
        assert [j.id for j in other.claim(limit=1, now=later + timedelta(days=1))] == [job.id]

    job_id = store.enqueue(registry.spec("charge")).id
    with Runner(store, registry) as runner:
        report = runner.tick(max_batches=1)

    assert (report.succeeded, store.get(job_id).status) == (0, Status.RUNNING)
    assert events(conn) == []


# Each plan: what the handler does at each attempt, and the events the ordinary path
# writes for it with every event opted into.
PLANS: dict[str, list[str]] = {
    "ok": ["Job Succeeded"],
    "retry-once": ["Job Retrying", "Job Succeeded"],
    "snooze-once": ["Job Succeeded"],
    "cancel": ["Job Cancelled"],
    "permanent": ["Job Dead"],
    "exhaust": ["Job Retrying", "Job Dead"],
}


def test_every_outcome_of_a_transactional_handler_writes_the_events_a_plain_handler_writes(
    store: PostgresStore, conn: psycopg.Connection, connect: Connect
) -> None:
    """The same plans run by a plain handler and by a transactional one, every event opted
    into: each job writes the same events, once each, in the same order. The failures are
    finished the ordinary way, after the handler's transaction rolled back."""
    canceller = PostgresStore(connect())
    registry = Registry()

    def act(job: JobContext) -> None:
        plan = job.payload["plan"]
        if plan == "retry-once" and job.attempt == 1:
            raise RuntimeError("once")
        if plan == "snooze-once" and job.snoozes == 0:
            raise RetryAfter(0)
        if plan == "cancel":
            canceller.cancel(job.id)
            job.progress(0.5)  # raises JobCancelled
        if plan == "permanent":
            raise PermanentError("bad input")
        if plan == "exhaust":
            raise RuntimeError("always")

    options: dict[str, Any] = {"max_attempts": 2, "backoff": INSTANT, "events": EVERY_EVENT}
    registry.task("plain", **options)(act)

    @registry.task("tx", transactional=True, **options)
    def tx_handler(job: JobContext, tx: psycopg.Connection) -> None:
        charge(job, tx)
        act(job)

    ids = {
        (kind, plan): store.enqueue(registry.spec(kind, {"plan": plan})).id
        for kind in ("plain", "tx")
        for plan in PLANS
    }
    drain(store, registry)

    written = {
        kind: {plan: [t for _, t in events(conn, ids[kind, plan])] for plan in PLANS}
        for kind in ("plain", "tx")
    }
    assert written == {"plain": PLANS, "tx": PLANS}
    assert store.get(ids["tx", "cancel"]).status == Status.CANCELLED
    # Only the successes' rows committed: one per succeeded transactional job.
    charged = {j for (j,) in conn.execute("select job_id from public.charges").fetchall()}
    assert charged == {ids["tx", p] for p in ("ok", "retry-once", "snooze-once")}


def test_a_transactional_task_that_opts_into_no_event_writes_none(
    store: PostgresStore, conn: psycopg.Connection
) -> None:
    """The no-cost rule: without events, neither the completion in the handler's
    transaction nor the failure finished the ordinary way writes anything."""
    registry = Registry()

    @registry.task("charge", transactional=True, backoff=INSTANT)
    def handler(job: JobContext, tx: psycopg.Connection) -> None:
        charge(job, tx)
        if job.payload["plan"] == "complete":
            complete_in(tx, job)
        if job.payload["plan"] == "retry-once" and job.attempt == 1:
            raise RuntimeError("once")

    ids = [
        store.enqueue(registry.spec("charge", {"plan": plan})).id
        for plan in ("return", "complete", "retry-once")
    ]
    drain(store, registry)

    assert [store.get(j).status for j in ids] == [Status.SUCCEEDED] * 3
    assert events(conn) == []


def test_complete_in_on_a_job_claimed_by_hand_writes_the_events_it_is_given(
    store: PostgresStore, conn: psycopg.Connection, connect: Connect
) -> None:
    """Outside a runner the task's options are the caller's: `events=` as on the task, in
    the caller's transaction; none given, none written; rolled back, none either."""
    registry = Registry()
    opted, plain, rolled = (store.enqueue(registry.spec("charge")).id for _ in range(3))
    claimed = {job.id: job for job in store.claim(limit=3)}
    mine = connect()

    with mine.transaction():
        complete_in(mine, claimed[opted], {"ok": True}, events=["succeeded", "retrying"])
        complete_in(mine, claimed[plain], {"ok": True})
        assert events(conn) == []  # not visible before the commit
    with pytest.raises(RuntimeError), mine.transaction():
        complete_in(mine, claimed[rolled], events=["succeeded"])
        raise RuntimeError("the caller's own write failed")

    assert [store.get(j).status for j in (opted, plain, rolled)] == [
        Status.SUCCEEDED,
        Status.SUCCEEDED,
        Status.RUNNING,
    ]
    assert events(conn) == [(opted, "Job Succeeded")]


def test_each_job_of_a_batch_handler_call_writes_its_own_outcomes_events(
    store: PostgresStore, conn: psycopg.Connection
) -> None:
    """Batch consume: each job's own outcome (settled alone, or the call's) writes the
    events its task opted into; a batch type that opts into none writes none."""
    registry = Registry()

    @registry.task("embed", batch_size=10, backoff=INSTANT, events=["succeeded", "retrying"])
    def embed(batch: Any) -> None:
        for job in batch.jobs:
            if job.payload["n"] == 1 and job.attempt == 1:
                batch.fail(job, RuntimeError("no vector"))
            if job.payload["n"] == 2 and job.snoozes == 0:
                batch.retry_after(job, 0)

    @registry.task("quiet", batch_size=10, backoff=INSTANT)
    def quiet(batch: Any) -> None:
        for job in batch.jobs:
            if job.attempt == 1:
                batch.fail(job, RuntimeError("once"))

    loud = [store.enqueue(registry.spec("embed", {"n": n})).id for n in range(3)]
    silent = [store.enqueue(registry.spec("quiet", {"n": n})).id for n in range(2)]
    drain(store, registry)

    assert [store.get(j).status for j in [*loud, *silent]] == [Status.SUCCEEDED] * 5
    assert [t for _, t in events(conn, loud[0])] == ["Job Succeeded"]
    assert [t for _, t in events(conn, loud[1])] == ["Job Retrying", "Job Succeeded"]
    assert [t for _, t in events(conn, loud[2])] == ["Job Succeeded"]
    assert all(events(conn, j) == [] for j in silent)
