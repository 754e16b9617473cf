"""The idempotency key table (tickq.job_keys) against a real database: every path that ends
a job frees its key, a retried job takes its key back or is refused, and concurrent
enqueues of one key, while other connections kill and cancel its holder, never leave two
live jobs with one key nor a key row out of step with its job."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from uuid import UUID

import psycopg
import pytest

import queue_core
from queue_core import EnqueueResult, JobBatch, PostgresStore, Status
from queue_core.console.jobs import BulkAction, OperatorConsole
from queue_core.errors import InvalidJob, InvalidTransition
from queue_core.model.validation import job_spec
from queue_core.policies.retention import Retention, policy
from queue_core.postgres import translate_errors
from tests.chaos.invariants import ALWAYS

Connect = Callable[[], psycopg.Connection]
NOW = datetime(2030, 6, 1, tzinfo=UTC)

# Live keyed jobs without their key row, and key rows without their live job: the chaos
# soak's invariant, checked here after each step.
OUT_OF_STEP = ALWAYS["the key table out of step with the live keyed jobs"]


def keys(conn: psycopg.Connection) -> list[tuple[str, UUID]]:
    return conn.execute("select idempotency_key, job_id from tickq.job_keys order by 1").fetchall()


def assert_in_step(conn: psycopg.Connection) -> None:
    assert conn.execute(OUT_OF_STEP).fetchall() == []


def test_a_keyless_job_never_touches_the_key_table(conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    store.enqueue(job_spec("t"))
    store.enqueue_many([job_spec("t"), job_spec("t")])
    assert keys(conn) == []


@pytest.mark.parametrize("how", ["fail", "reclaim", "cancel", "operator cancel"])
def test_every_path_that_ends_a_job_frees_its_key(conn: psycopg.Connection, how: str) -> None:
    store = PostgresStore(conn)
    first = store.enqueue(job_spec("t", idempotency_key="k", max_attempts=1), now=NOW)
    if how == "fail":
        (job,) = store.claim(now=NOW)
        store.fail(job, "boom", now=NOW)
    elif how == "reclaim":
        store.claim(lease_seconds=5, now=NOW)
        store.reclaim(now=NOW + timedelta(seconds=10))
    elif how == "cancel":
        store.cancel(first.id, now=NOW)
    else:
        OperatorConsole(conn).act(BulkAction.CANCEL, [first.id], now=NOW)
    assert store.get(first.id).status in (Status.DEAD, Status.CANCELLED)
    assert keys(conn) == []

    again = store.enqueue(job_spec("t", idempotency_key="k"), now=NOW)
    assert not again.duplicate and again.id != first.id
    assert keys(conn) == [("k", again.id)]


def test_a_cancelled_parent_frees_its_waiting_childrens_keys(conn: psycopg.Connection) -> None:
    parent = queue_core.enqueue(conn, "parent")
    child = queue_core.enqueue(conn, "child", after=[parent.id], idempotency_key="child-key")
    PostgresStore(conn).cancel(parent.id)

    assert PostgresStore(conn).get(child.id).status == Status.CANCELLED
    assert keys(conn) == []
    again = queue_core.enqueue(conn, "child", idempotency_key="child-key")
    assert not again.duplicate


def test_a_succeeded_job_keeps_its_key(conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    first = store.enqueue(job_spec("t", idempotency_key="k"))
    (job,) = store.claim()
    store.complete(job, {"ok": True})

    assert keys(conn) == [("k", first.id)]
    duplicate = store.enqueue(job_spec("t", idempotency_key="k"))
    assert duplicate.duplicate and duplicate.id == first.id
    assert duplicate.status == Status.SUCCEEDED


def test_a_retried_job_takes_its_key_back(conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    first = store.enqueue(job_spec("t", idempotency_key="k"))
    store.cancel(first.id)
    store.retry(first.id)

    assert keys(conn) == [("k", first.id)]
    assert store.enqueue(job_spec("t", idempotency_key="k")).id == first.id


def test_a_retry_whose_key_was_taken_meanwhile_is_refused_and_changes_nothing(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    first = store.enqueue(job_spec("t", idempotency_key="k"))
    store.cancel(first.id)
    taker = store.enqueue(job_spec("t", idempotency_key="k"))
    before = conn.execute("select * from tickq.jobs order by id").fetchall()

    with pytest.raises(InvalidTransition, match="idempotency key is held"):
        store.retry(first.id)
    (outcome,) = OperatorConsole(conn).act(BulkAction.RETRY, [first.id])
    assert outcome.outcome == "key taken"

    assert conn.execute("select * from tickq.jobs order by id").fetchall() == before
    assert keys(conn) == [("k", taker.id)]


def test_a_retry_racing_the_key_taker_fails_with_a_clear_error(
    conn: psycopg.Connection,
) -> None:
    """The update that jobs_retry makes after its check, when another job took the key in
    between: the trigger refuses it as the unique index did, and nothing changes."""
    store = PostgresStore(conn)
    first = store.enqueue(job_spec("t", idempotency_key="k"))
    store.cancel(first.id)
    taker = store.enqueue(job_spec("t", idempotency_key="k"))

    with pytest.raises(psycopg.errors.UniqueViolation, match="idempotency key k is held"):
        conn.execute(
            "update tickq.jobs set status = 'queued', attempts = 0, finished_at = null"
            " where id = %s",
            (first.id,),
        )
    with pytest.raises(InvalidJob, match="idempotency_key"), translate_errors():
        conn.execute(
            "update tickq.jobs set status = 'queued', attempts = 0, finished_at = null"
            " where id = %s",
            (first.id,),
        )
    assert store.get(first.id).status == Status.CANCELLED
    assert keys(conn) == [("k", taker.id)]


def test_pruning_a_succeeded_job_frees_its_key_in_the_same_statement(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    store.enqueue_many([job_spec("t", idempotency_key=f"k{n}") for n in range(3)], now=NOW)
    for job in store.claim(limit=3, now=NOW):
        store.complete(job, None, now=NOW)
    Retention(conn).set(policy(keep_last=0))
    report = Retention(conn).prune(now=NOW)

    assert report.deleted == 3
    assert keys(conn) == []


def test_truncating_the_jobs_empties_the_keys(conn: psycopg.Connection) -> None:
    PostgresStore(conn).enqueue(job_spec("t", idempotency_key="k"))
    conn.execute("truncate tickq.jobs cascade")
    assert keys(conn) == []


def test_a_batch_repeating_and_reusing_keys_returns_the_holders(conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    held = store.enqueue(job_spec("t", idempotency_key="held"))
    results = store.enqueue_batch(
        JobBatch.of(
            [
                job_spec("t", idempotency_key="new"),
                job_spec("t", idempotency_key="held"),
                job_spec("t"),
                job_spec("t", idempotency_key="new"),
            ]
        )
    )

    assert [r.duplicate for r in results] == [False, True, False, True]
    assert results[1].id == held.id and results[3].id == results[0].id
    assert_in_step(conn)


# Races


def end_holder(store: PostgresStore, key: str, *, kill: bool) -> None:
    """Fail (kill) or cancel the job holding `key`, if any, as a racing worker would."""
    holder = store.conn.execute(
        "select job_id from tickq.job_keys where idempotency_key = %s", (key,)
    ).fetchone()
    if holder is None:
        return
    if kill:
        for job in store.claim(limit=5):
            store.fail(job, "killed")
        return
    with contextlib.suppress(InvalidTransition):  # ended meanwhile by a claim and fail
        store.cancel(holder[0])


def test_concurrent_enqueues_of_one_key_while_its_holder_is_killed_and_cancelled(
    conn: psycopg.Connection, connect: Connect
) -> None:
    """Enqueuers (single and batch) hammer one key while a killer fails and cancels
    whichever job holds it. Every enqueue returns a job that held the key; the jobs created
    are exactly the non-duplicate answers; at most one is live; the key table matches."""
    rounds, enqueuers = 40, 4
    barrier = threading.Barrier(enqueuers + 1)
    answers: list[EnqueueResult] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def enqueue(n: int) -> None:
        store = PostgresStore(connect())
        try:
            for r in range(rounds):
                barrier.wait(timeout=30)
                spec = job_spec("t", {"by": n, "round": r}, idempotency_key="hot", max_attempts=1)
                got = store.enqueue_many([spec])[0] if n % 2 else store.enqueue(spec)
                with lock:
                    answers.append(got)
        except BaseException as exc:  # surfaced by the assertion below
            with lock:
                errors.append(exc)
            barrier.abort()

    def kill() -> None:
        store = PostgresStore(connect())
        try:
            for r in range(rounds):
                barrier.wait(timeout=30)
                end_holder(store, "hot", kill=bool(r % 2))
        except BaseException as exc:
            with lock:
                errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=enqueue, args=(n,)) for n in range(enqueuers)]
    threads.append(threading.Thread(target=kill))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    assert len(answers) == rounds * enqueuers
    jobs = dict(conn.execute("select id, status from tickq.jobs").fetchall())
    created = {a.id for a in answers if not a.duplicate}
    assert created == set(jobs), "the jobs created are exactly the non-duplicate answers"
    assert {a.id for a in answers} <= set(jobs)
    assert len(created) > 1, "the killer freed the key at least once"
    live = [i for i, s in jobs.items() if s not in ("dead", "cancelled")]
    assert len(live) <= 1
    assert keys(conn) == [("hot", i) for i in live]
    assert_in_step(conn)
