"""Dependencies under concurrency, with real connections and the interleavings forced.

Each test holds a row lock so the racing statements are all in flight at once (and checks
that they were, in pg_stat_activity), then lets them go.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from uuid import UUID

import psycopg
import pytest

import queue_core
from queue_core import EnqueueResult, Job, PostgresStore, Status
from queue_core.model import transitions

Connect = Callable[[], psycopg.Connection]


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.01)


def blocked_on_locks(conn: psycopg.Connection) -> int:
    """How many other sessions of this database wait for a lock right now."""
    row = conn.execute(
        "select count(*) from pg_stat_activity"
        " where datname = current_database() and wait_event_type = 'Lock'"
        "   and pid <> pg_backend_pid()"
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_parents_of_a_fan_in_finishing_on_many_workers_at_once_release_it_once(
    connect: Connect,
) -> None:
    parents_count = 4
    setup = connect()
    parents = [queue_core.enqueue(setup, "part", {"n": n}).id for n in range(parents_count)]
    child = queue_core.enqueue(setup, "join", after=parents)
    claimed = PostgresStore(setup).claim(limit=parents_count)
    assert {job.id for job in claimed} == set(parents)
    workers = [PostgresStore(connect()) for _ in claimed]
    # Given the child row locked, every worker's finish reaches the child and waits there.
    blocker = connect()
    start = threading.Barrier(len(workers) + 1)

    def finish(store: PostgresStore, job: Job) -> set[UUID]:
        start.wait()
        return store.finish([transitions.succeeded(job, job.payload["n"])])

    with ThreadPoolExecutor(len(workers)) as pool:
        with blocker.transaction():
            blocker.execute("select from tickq.jobs where id = %s for update", (child.id,))
            futures = [pool.submit(finish, s, j) for s, j in zip(workers, claimed, strict=True)]
            start.wait()
            # When all the finishes are in flight at once, behind the lock:
            wait_until(
                lambda: blocked_on_locks(blocker) == len(workers),
                f"{len(workers)} finishes wait on the child",
            )
        held = [future.result(timeout=30) for future in futures]

    # Then each parent's outcome held, and the child was released exactly once.
    assert set().union(*held) == set(parents)
    row = setup.execute(
        "select status, pending_parents from tickq.jobs where id = %s", (child.id,)
    ).fetchone()
    assert row == ("queued", 0)
    (job,) = PostgresStore(setup).claim(limit=10)
    assert job.id == child.id
    assert PostgresStore(setup).parent_results(child.id) == dict(
        zip(parents, range(4), strict=True)
    )


@pytest.mark.parametrize(
    "verdict, expected", [("succeed", Status.QUEUED), ("fail", Status.CANCELLED)]
)
def test_a_child_enqueued_while_its_parent_finishes_is_settled_by_that_finish(
    connect: Connect, verdict: str, expected: Status
) -> None:
    """The enqueue locks the parent first; the finish started before the child existed."""
    setup = connect()
    parent = queue_core.enqueue(setup, "extract")
    (running,) = PostgresStore(setup).claim()
    finisher = PostgresStore(connect())
    enqueuer = connect()

    def finish() -> None:
        if verdict == "succeed":
            finisher.complete(running, "text")
        else:
            finisher.fail(running, "broken", permanent=True)

    with ThreadPoolExecutor(1) as pool:
        with enqueuer.transaction():
            child = queue_core.enqueue(enqueuer, "embed", after=[parent.id])
            assert child.status == Status.WAITING
            finished = pool.submit(finish)
            # When the finish waits for the enqueue's lock on the parent:
            wait_until(
                lambda: blocked_on_locks(enqueuer) == 1 or finished.done(),
                "the finish waits on the parent",
            )
            assert not finished.done(), "the finish did not wait for the enqueue"
        finished.result(timeout=30)

    assert PostgresStore(setup).get(child.id).status == expected


@pytest.mark.parametrize("verdict, expected", [("succeed", Status.QUEUED), ("fail", None)])
def test_a_child_enqueued_while_its_parent_finishes_reads_the_parents_outcome(
    connect: Connect, verdict: str, expected: Status | None
) -> None:
    """The finish locks the parent first; the enqueue waits and then sees how it ended."""
    setup = connect()
    parent = queue_core.enqueue(setup, "extract")
    (running,) = PostgresStore(setup).claim()
    finishing = connect()
    enqueuer = connect()

    def enqueue() -> EnqueueResult:
        return queue_core.enqueue(enqueuer, "embed", after=[parent.id])

    with ThreadPoolExecutor(1) as pool:
        with finishing.transaction():
            store = PostgresStore(finishing)
            if verdict == "succeed":
                store.complete(running, "text")
            else:
                store.fail(running, "broken", permanent=True)
            enqueued = pool.submit(enqueue)
            wait_until(
                lambda: blocked_on_locks(finishing) == 1 or enqueued.done(),
                "the enqueue waits on the parent",
            )
            assert not enqueued.done(), "the enqueue did not wait for the finish"
        outcome: Any
        try:
            outcome = enqueued.result(timeout=30).status
        except queue_core.InvalidParent as exc:
            outcome = None
            assert "is dead" in str(exc)

    assert outcome == expected
    jobs = PostgresStore(setup).list_jobs().jobs
    assert len(jobs) == (2 if expected else 1)
