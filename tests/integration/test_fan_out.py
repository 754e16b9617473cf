"""Fan-out with a bounded cost: the statement that finishes a parent settles at most a
budget of its children (the setting tickq.settle_budget), records the rest in its own
transaction, and later short transactions settle them, so no child is forgotten, even when
the worker dies in between."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import psycopg

import queue_core
from queue_core import JobBatch, PostgresStore, Registry, Runner, Status
from queue_core.model.validation import job_spec

BUDGET = 300
CHILDREN = 5000


def statuses(conn: psycopg.Connection, parent: UUID) -> dict[str, int]:
    rows = conn.execute(
        "select c.status, count(*) from tickq.job_dependencies d"
        " join tickq.jobs c on c.id = d.child_id where d.parent_id = %s group by c.status",
        (parent,),
    ).fetchall()
    return {status: n for status, n in rows}


def pending(conn: psycopg.Connection) -> int:
    row = conn.execute("select count(*) from tickq.job_settlements").fetchone()
    assert row is not None
    return int(row[0])


def fan_out(conn: psycopg.Connection, children: int = CHILDREN) -> UUID:
    parent = queue_core.enqueue(conn, "parent")
    specs = [job_spec("child", {"n": n}) for n in range(children)]
    PostgresStore(conn).enqueue_after(JobBatch.of(specs), [[parent.id]] * children)
    return parent.id


def finish_parent(connect: Callable[[], psycopg.Connection], *, fail: bool = False) -> None:
    """One worker, under a small budget, claims the parent and ends it."""
    worker = connect()
    worker.execute("select set_config('tickq.settle_budget', %s, false)", (str(BUDGET),))
    store = PostgresStore(worker)
    (job,) = store.claim(limit=1)
    if fail:
        store.fail(job, "broken", permanent=True)
    else:
        store.complete(job)
    worker.close()  # the worker is gone before anything else settles the rest


def test_a_parents_success_releases_a_budget_of_children_and_later_transactions_the_rest(
    conn: psycopg.Connection, connect: Callable[[], psycopg.Connection]
) -> None:
    parent = fan_out(conn)

    finish_parent(connect)

    assert statuses(conn, parent) == {"queued": BUDGET, "waiting": CHILDREN - BUDGET}
    assert pending(conn) == 1
    # Another worker's rounds, each one short transaction of at most the budget
    assert PostgresStore(connect()).settle_pending(rounds=2) == 2000
    assert PostgresStore(connect()).settle_pending() == CHILDREN - BUDGET - 2000
    assert statuses(conn, parent) == {"queued": CHILDREN}
    assert pending(conn) == 0
    assert PostgresStore(conn).settle_pending() == 0


def test_a_parents_failure_cancels_its_descendants_a_budget_at_a_time(
    conn: psycopg.Connection, connect: Callable[[], psycopg.Connection]
) -> None:
    parent = fan_out(conn, 1000)
    (first,) = conn.execute(
        "select child_id from tickq.job_dependencies where parent_id = %s"
        " order by child_id limit 1",
        (parent,),
    ).fetchone() or (None,)
    grandchildren = PostgresStore(conn).enqueue_after(
        JobBatch.of([job_spec("grandchild") for _ in range(500)]), [[first]] * 500
    )

    finish_parent(connect, fail=True)
    assert PostgresStore(connect()).settle_pending() == 1000 + 500 - BUDGET

    assert statuses(conn, parent) == {"cancelled": 1000}
    assert statuses(conn, first) == {"cancelled": 500}
    errors = conn.execute(
        "select distinct error from tickq.jobs where status = 'cancelled'"
    ).fetchall()
    assert errors == [(f"parent {parent} is dead",)]
    assert {g.id for g in grandchildren} and pending(conn) == 0


def test_a_child_enqueued_after_its_parent_succeeded_is_not_released_by_it_again(
    conn: psycopg.Connection, connect: Callable[[], psycopg.Connection]
) -> None:
    # Given a parent whose children are still being released, and another parent running
    parent = fan_out(conn)
    other = queue_core.enqueue(conn, "other")
    finish_parent(connect)
    assert pending(conn) == 1
    # When a child of both is enqueued (the first counts nothing: it has succeeded)
    late = queue_core.enqueue(conn, "late", after=[parent, other.id])
    assert late.status == Status.WAITING

    PostgresStore(conn).settle_pending()

    # Then it still waits for the other, and that one's success releases it
    assert PostgresStore(conn).get(late.id).status == Status.WAITING
    store = PostgresStore(conn)
    (job,) = [j for j in store.claim(limit=CHILDREN + 1) if j.id == other.id]
    store.complete(job)
    assert store.get(late.id).status == Status.QUEUED


def test_a_tick_settles_what_a_finishing_statement_left(
    conn: psycopg.Connection, connect: Callable[[], psycopg.Connection]
) -> None:
    parent = fan_out(conn, 1500)
    finish_parent(connect)
    assert pending(conn) == 1

    registry = Registry()
    registry.task("child")(lambda job: None)
    with Runner(PostgresStore(conn), registry, batch_size=10) as runner:
        runner.tick(max_batches=0)

    assert statuses(conn, parent) == {"queued": 1500}
    assert pending(conn) == 0
