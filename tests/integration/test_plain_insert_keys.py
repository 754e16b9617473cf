"""Idempotency held by the database, not by tickq's statements: a plain INSERT, a COPY and
tickq.enqueue of a key that a live or succeeded job of the same owner holds fail with
unique_violation (23505) or answer with the holder, also when many connections insert the
key at the same moment, and the key table stays in step with the jobs."""

from __future__ import annotations

import threading
from collections.abc import Callable
from uuid import UUID, uuid4

import psycopg
import pytest

from queue_core import PostgresStore, Status
from queue_core.model.validation import job_spec
from tests.integration.test_job_keys import assert_in_step, keys

Connect = Callable[[], psycopg.Connection]
INSERT = "insert into tickq.jobs (type, idempotency_key, user_id) values ('t', %s, %s)"


def plain_insert(conn: psycopg.Connection, key: str, owner: UUID | None = None) -> UUID:
    row = conn.execute(INSERT + " returning id", (key, owner)).fetchone()
    assert row is not None
    return UUID(str(row[0]))


def test_a_plain_insert_takes_its_key(conn: psycopg.Connection) -> None:
    job = plain_insert(conn, "k")
    assert keys(conn) == [("k", job)]
    again = PostgresStore(conn).enqueue(job_spec("t", idempotency_key="k"))
    assert again.duplicate and again.id == job
    assert_in_step(conn)


@pytest.mark.parametrize("holder", ["store", "plain", "sql function", "succeeded"])
def test_a_plain_insert_of_a_held_key_fails_and_writes_nothing(
    conn: psycopg.Connection, holder: str
) -> None:
    store = PostgresStore(conn)
    if holder == "store":
        held = store.enqueue(job_spec("t", idempotency_key="k")).id
    elif holder == "plain":
        held = plain_insert(conn, "k")
    elif holder == "sql function":
        row = conn.execute("select tickq.enqueue('t', idempotency_key => 'k')").fetchone()
        assert row is not None
        held = row[0]
    else:
        held = store.enqueue(job_spec("t", idempotency_key="k")).id
        (job,) = store.claim()
        store.complete(job, {"ok": True})
    with pytest.raises(psycopg.errors.UniqueViolation):
        plain_insert(conn, "k")
    assert conn.execute("select id from tickq.jobs").fetchall() == [(held,)]
    assert keys(conn) == [("k", held)]


def test_a_multi_row_insert_repeating_a_key_fails_whole(conn: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute(
            "insert into tickq.jobs (type, idempotency_key) values ('t', 'a'), ('t', 'b'),"
            " ('t', 'a')"
        )
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (0,)
    assert keys(conn) == []


def test_copy_takes_keys_and_refuses_a_held_one(conn: psycopg.Connection) -> None:
    held = plain_insert(conn, "held")
    with conn.cursor() as cur, cur.copy("copy tickq.jobs (type, idempotency_key) from stdin") as cp:
        cp.write_row(("t", "fresh"))
    assert {k for k, _ in keys(conn)} == {"held", "fresh"}
    with (
        pytest.raises(psycopg.errors.UniqueViolation),
        conn.cursor() as cur,
        cur.copy("copy tickq.jobs (type, idempotency_key) from stdin") as cp,
    ):
        cp.write_row(("t", "other"))
        cp.write_row(("t", "held"))
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (2,)
    assert ("held", held) in keys(conn)
    assert_in_step(conn)


def test_keys_are_per_owner_and_free_again_once_the_holder_ends(conn: psycopg.Connection) -> None:
    alice, bob = uuid4(), uuid4()
    store = PostgresStore(conn)
    first = plain_insert(conn, "k", alice)
    plain_insert(conn, "k", bob)  # another owner's key is another key
    plain_insert(conn, "k")  # and so is the key of no owner
    store.cancel(first)
    again = plain_insert(conn, "k", alice)
    assert again != first
    jobs = store.claim(limit=10)
    for job in jobs:
        store.fail(job, "boom", permanent=True)
    assert keys(conn) == []
    plain_insert(conn, "k", alice)
    assert_in_step(conn)


def test_a_job_inserted_dead_or_cancelled_takes_no_key(conn: psycopg.Connection) -> None:
    conn.execute(
        "insert into tickq.jobs (type, idempotency_key, status, finished_at)"
        " values ('t', 'k', 'dead', now()), ('t', 'k', 'cancelled', now())"
    )
    assert keys(conn) == []
    live = plain_insert(conn, "k")
    assert keys(conn) == [("k", live)]
    assert_in_step(conn)


def race(connect: Connect, attempts: list[Callable[[psycopg.Connection], object]]) -> list[object]:
    """Run each attempt on its own connection, all released at once by a barrier, each in a
    transaction that holds its insert a moment so the others queue behind it; returns what
    each returned, or the exception it raised."""
    barrier = threading.Barrier(len(attempts))
    outcomes: list[object] = [None] * len(attempts)

    def run(index: int) -> None:
        conn = connect()
        try:
            barrier.wait(timeout=30)
            with conn.transaction():
                outcomes[index] = attempts[index](conn)
                conn.execute("select pg_sleep(0.05)")
        except psycopg.Error as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(attempts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def test_concurrent_plain_inserts_of_one_key_leave_exactly_one_job(
    conn: psycopg.Connection, connect: Connect
) -> None:
    for round_ in range(5):
        key = f"hot-{round_}"
        outcomes = race(connect, [lambda c, key=key: plain_insert(c, key)] * 6)
        won = [o for o in outcomes if isinstance(o, UUID)]
        lost = [o for o in outcomes if isinstance(o, psycopg.errors.UniqueViolation)]
        assert len(won) == 1 and len(lost) == 5, outcomes
        assert [k for k in keys(conn) if k[0] == key] == [(key, won[0])]
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (5,)
    assert_in_step(conn)


def test_plain_inserts_racing_tickqs_enqueues_of_one_key(
    conn: psycopg.Connection, connect: Connect
) -> None:
    """Plain inserts, the store's single and batch enqueue and tickq.enqueue at once: one
    job; the plain inserts that lose fail with 23505, every other loser answers with it."""

    def single(c: psycopg.Connection) -> object:
        return PostgresStore(c).enqueue(job_spec("t", idempotency_key="mixed"))

    def batch(c: psycopg.Connection) -> object:
        return PostgresStore(c).enqueue_many([job_spec("t", idempotency_key="mixed")])[0]

    def sql(c: psycopg.Connection) -> object:
        row = c.execute("select tickq.enqueue('t', idempotency_key => 'mixed')").fetchone()
        assert row is not None
        return row[0]

    for _ in range(4):
        conn.execute("truncate tickq.jobs")
        outcomes = race(connect, [lambda c: plain_insert(c, "mixed")] * 3 + [single, batch, sql])
        (job,) = conn.execute("select id from tickq.jobs").fetchall()
        answered = {getattr(o, "id", o) for o in outcomes[3:]}
        assert answered == {job[0]}, outcomes
        for outcome in outcomes[:3]:
            assert outcome == job[0] or isinstance(outcome, psycopg.errors.UniqueViolation)
        assert keys(conn) == [("mixed", job[0])]
        assert PostgresStore(conn).get(job[0]).status == Status.QUEUED
