"""Enqueue: idempotency keys under races, bulk inserts in one statement, and the caller's
transaction deciding whether a job exists."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from psycopg import sql

import queue_core
from queue_core import EnqueueResult, PostgresStore, Registry, Status
from queue_core.model.validation import job_spec

Connect = Callable[[], psycopg.Connection]


def count_jobs(conn: psycopg.Connection) -> int:
    row = conn.execute("select count(*) from tickq.jobs").fetchone()
    assert row is not None
    return int(row[0])


def make_dead(store: PostgresStore, key: str) -> EnqueueResult:
    first = store.enqueue(job_spec("embed", idempotency_key=key, max_attempts=1))
    (claimed,) = store.claim()
    store.fail(claimed, "boom")
    assert store.get(first.id).status == Status.DEAD
    return first


def test_enqueue_inserts_a_queued_job_and_returns_its_row(conn: psycopg.Connection) -> None:
    result = PostgresStore(conn).enqueue(job_spec("embed", {"doc": 1}, priority=2))

    assert result.duplicate is False
    assert result.status == Status.QUEUED
    assert result.job is not None
    assert (result.job.id, result.job.payload, result.job.priority) == (result.id, {"doc": 1}, 2)
    assert count_jobs(conn) == 1


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"payload": {"b": 1, "a": [1.5, None, "ü"]}, "queue": "mail", "priority": -3},
        {"user_id": uuid4(), "max_attempts": 9, "lease_seconds": 45, "delay": 90},
        {"run_after": datetime(2031, 5, 1, tzinfo=UTC), "backoff_policy": {"jitter": 0.5}},
    ],
)
def test_the_row_a_single_enqueue_returns_is_the_row_stored(
    conn: psycopg.Connection, options: dict[str, Any]
) -> None:
    """Without a key the row is rebuilt from the request and the database's answer."""
    store = PostgresStore(conn)

    result = store.enqueue(job_spec("embed", **options))

    assert result.job == store.get(result.id)


def test_threads_sharing_one_store_each_get_their_own_job_back(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    found: list[tuple[int, EnqueueResult]] = []

    def enqueue(n: int) -> None:
        for _ in range(20):
            found.append((n, store.enqueue(job_spec("embed", {"n": n}))))

    threads = [threading.Thread(target=enqueue, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(found) == 80
    assert all(r.job is not None and r.job.payload == {"n": n} for n, r in found)
    assert {store.get(r.id).payload["n"] for n, r in found} == {0, 1, 2, 3}
    assert count_jobs(conn) == 80


def test_a_second_enqueue_of_a_live_key_returns_the_same_job_as_a_duplicate(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    first = store.enqueue(job_spec("embed", {"doc": 1}, idempotency_key="doc-1"))

    second = store.enqueue(job_spec("embed", {"doc": 2}, idempotency_key="doc-1"))

    assert second.duplicate is True
    assert second.id == first.id
    assert second.job is not None and second.job.payload == {"doc": 1}
    assert count_jobs(conn) == 1


def test_a_succeeded_job_still_holds_its_key(conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    first = store.enqueue(job_spec("embed", idempotency_key="doc-1"))
    (claimed,) = store.claim()
    store.complete(claimed, {"ok": True})

    again = store.enqueue(job_spec("embed", idempotency_key="doc-1"))

    assert again.duplicate is True
    assert again.id == first.id
    assert again.status == Status.SUCCEEDED


def test_a_key_is_free_again_once_its_job_is_dead(conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    dead = make_dead(store, "doc-1")

    again = store.enqueue(job_spec("embed", idempotency_key="doc-1"))

    assert again.duplicate is False
    assert again.id != dead.id
    assert count_jobs(conn) == 2


def test_a_key_is_free_again_once_its_job_is_cancelled(conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    first = store.enqueue(job_spec("embed", idempotency_key="doc-1"))
    store.cancel(first.id)

    again = store.enqueue(job_spec("embed", idempotency_key="doc-1"))

    assert again.duplicate is False
    assert again.id != first.id
    assert store.get(first.id).status == Status.CANCELLED


def test_keys_are_scoped_to_their_owner(conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    alice, bob = uuid4(), uuid4()

    results = [
        store.enqueue(job_spec("embed", idempotency_key="doc-1", user_id=owner))
        for owner in (alice, bob, None, alice)
    ]

    assert [r.duplicate for r in results] == [False, False, False, True]
    assert len({r.id for r in results}) == 3
    assert results[3].id == results[0].id


def test_twenty_concurrent_enqueues_of_one_key_leave_exactly_one_job(
    conn: psycopg.Connection, connect: Connect
) -> None:
    clients = 20
    connections = [connect() for _ in range(clients)]
    barrier = threading.Barrier(clients)
    results: list[EnqueueResult] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def enqueue(connection: psycopg.Connection, n: int) -> None:
        spec = job_spec("embed", {"client": n}, idempotency_key="race-key")
        try:
            barrier.wait(timeout=30)
            result = PostgresStore(connection).enqueue(spec)
        except BaseException as exc:  # surfaced by the assertion below
            with lock:
                errors.append(exc)
            return
        with lock:
            results.append(result)

    threads = [threading.Thread(target=enqueue, args=(c, n)) for n, c in enumerate(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert len(results) == clients
    assert len({r.id for r in results}) == 1
    assert sorted(r.duplicate for r in results) == [False] + [True] * (clients - 1)
    assert count_jobs(conn) == 1


# Bulk


def counting_cursor(calls: list[str]) -> type[psycopg.Cursor[Any]]:
    """A cursor class that records every statement executed through it."""

    class CountingCursor(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            calls.append(str(query)[:60])
            return super().execute(query, params, **kwargs)

    return CountingCursor


def test_bulk_enqueue_is_one_statement_and_resolves_in_batch_duplicate_keys(
    database_url: str, conn: psycopg.Connection
) -> None:
    calls: list[str] = []
    specs = [
        job_spec("embed", {"n": 0}, idempotency_key="a"),
        job_spec("embed", {"n": 1}),
        job_spec("embed", {"n": 2}, idempotency_key="a"),
        job_spec("embed", {"n": 3}, idempotency_key="b"),
        job_spec("embed", {"n": 4}),
    ]
    with psycopg.connect(
        database_url, autocommit=True, cursor_factory=counting_cursor(calls)
    ) as counted:
        store = PostgresStore(counted)
        store.limits_configured()  # the store's cached probe for queue limits, read up front
        calls.clear()
        results = store.enqueue_many(specs)

    assert len(calls) == 1
    assert len(results) == 5
    assert [r.duplicate for r in results] == [False, False, True, False, False]
    assert results[2].id == results[0].id
    assert len({r.id for r in results}) == 4
    assert count_jobs(conn) == 4


def test_bulk_enqueue_returns_live_jobs_holding_a_key_as_duplicates(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    existing = store.enqueue(job_spec("embed", idempotency_key="a"))

    results = store.enqueue_many(
        [job_spec("embed", idempotency_key="a"), job_spec("embed", idempotency_key="b")]
    )

    assert [r.duplicate for r in results] == [True, False]
    assert results[0].id == existing.id
    assert count_jobs(conn) == 2


def test_bulk_enqueue_of_a_thousand_jobs_keeps_their_order(conn: psycopg.Connection) -> None:
    specs = [job_spec("embed", {"n": n}) for n in range(1000)]

    results = PostgresStore(conn).enqueue_many(specs)

    rows = dict(conn.execute("select id, (payload->>'n')::int from tickq.jobs").fetchall())
    assert [rows[r.id] for r in results] == list(range(1000))


def test_bulk_enqueue_stores_every_column_whether_shared_or_per_job(
    conn: psycopg.Connection,
) -> None:
    """A column the batch shares goes once, one that varies goes per job: both land."""
    when = datetime(2030, 1, 1, tzinfo=UTC)
    owner = uuid4()
    shared = {"queue": "mail", "priority": 7, "backoff_policy": {"base": 2.0, "max": 60.0}}
    specs = [
        job_spec(
            "embed",
            {"n": 0},
            idempotency_key="k0",
            user_id=owner,
            max_attempts=5,
            run_after=when,
            lease_seconds=90,
            **shared,
        ),
        job_spec("resize", None, max_attempts=1, delay=3600, **shared),
    ]

    results = PostgresStore(conn).enqueue_many(specs, now=when)

    store = PostgresStore(conn)
    first, second = (store.get(r.id) for r in results)
    assert [r.status for r in results] == [Status.QUEUED, Status.QUEUED]
    assert (first.type, first.payload, first.idempotency_key, first.user_id) == (
        "embed",
        {"n": 0},
        "k0",
        owner,
    )
    assert (second.type, second.payload, second.idempotency_key, second.user_id) == (
        "resize",
        {},
        None,
        None,
    )
    assert (first.max_attempts, first.lease_seconds, first.run_after) == (5, 90, when)
    assert (second.max_attempts, second.lease_seconds) == (1, None)
    assert second.run_after == when + timedelta(hours=1)
    for job in (first, second):
        assert (job.queue, job.priority, job.created_at) == ("mail", 7, when)
        assert (job.backoff_base, job.backoff_factor, job.backoff_max) == (2.0, 2.0, 60.0)


def test_enqueue_many_stores_requests_of_several_types_with_each_ones_defaults(
    conn: psycopg.Connection,
) -> None:
    registry = Registry()
    registry.task("embed", queue="gpu", max_attempts=7)(lambda job: None)
    registry.task("resize", priority=4)(lambda job: None)
    requests: list[dict[str, Any]] = [
        {"type": "embed", "idempotency_key": "e1"},
        {"type": "resize", "payload": {"w": 10}},
        {"type": "embed", "payload": {"doc": 2}, "priority": 9},  # a request beyond the plain shape
    ]

    results = queue_core.enqueue_many(conn, requests, using=registry)

    store = PostgresStore(conn)
    jobs = [store.get(r.id) for r in results]
    assert [(j.type, j.queue, j.max_attempts, j.priority) for j in jobs] == [
        ("embed", "gpu", 7, 0),
        ("resize", "default", 3, 4),
        ("embed", "gpu", 7, 9),
    ]
    assert [(j.payload, j.idempotency_key) for j in jobs] == [
        ({}, "e1"),
        ({"w": 10}, None),
        ({"doc": 2}, None),
    ]


# Transactional enqueue


@pytest.fixture
def documents(conn: psycopg.Connection) -> Any:
    """A table of the caller's own data, created for this test and dropped after it."""
    table = sql.Identifier(f"documents_{secrets.token_hex(4)}")
    conn.execute(sql.SQL("create table {} (id int primary key, body text)").format(table))
    yield table
    conn.execute(sql.SQL("drop table {}").format(table))


def test_enqueue_inside_a_transaction_that_fails_leaves_no_job(
    conn: psycopg.Connection, documents: sql.Identifier
) -> None:
    class Abort(Exception):
        pass

    with pytest.raises(Abort), conn.transaction():
        conn.execute(sql.SQL("insert into {} values (1, 'hello')").format(documents))
        queue_core.enqueue(conn, "embed", {"document": 1}, using=Registry())
        raise Abort

    assert count_jobs(conn) == 0
    rows = conn.execute(sql.SQL("select count(*) from {}").format(documents)).fetchone()
    assert rows == (0,)


def test_enqueue_commits_together_with_the_callers_own_insert(
    conn: psycopg.Connection, connect: Connect, documents: sql.Identifier
) -> None:
    observer = connect()

    with conn.transaction():
        conn.execute(sql.SQL("insert into {} values (1, 'hello')").format(documents))
        result = queue_core.enqueue(conn, "embed", {"document": 1}, using=Registry())
        seen_before_commit = count_jobs(observer)

    assert seen_before_commit == 0
    assert count_jobs(observer) == 1
    assert PostgresStore(observer).get(result.id).payload == {"document": 1}
    rows = observer.execute(sql.SQL("select body from {}").format(documents)).fetchall()
    assert rows == [("hello",)]


def test_enqueue_many_inside_a_transaction_rolls_back_with_it(conn: psycopg.Connection) -> None:
    with pytest.raises(RuntimeError), conn.transaction():
        results = queue_core.enqueue_many(
            conn, [{"type": "embed"}, {"type": "embed", "payload": {"n": 1}}], using=Registry()
        )
        assert len(results) == 2
        raise RuntimeError("caller failed")

    assert count_jobs(conn) == 0
