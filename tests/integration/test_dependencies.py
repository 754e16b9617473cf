"""Dependencies against a real database: waiting, release in the parent's transaction,
cascading cancellation, refusals that write nothing, and retention keeping needed parents."""

from __future__ import annotations

import threading
import time
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest

import queue_core
from queue_core import (
    InvalidJob,
    InvalidParent,
    InvalidTransition,
    JobContext,
    PostgresStore,
    Registry,
    Runner,
    Status,
)
from queue_core.model.dependencies import MAX_PARENTS
from queue_core.policies.retention import Retention, policy


@pytest.fixture
def store(conn: psycopg.Connection) -> PostgresStore:
    return PostgresStore(conn)


def count(conn: psycopg.Connection, table: str = "jobs") -> int:
    row = conn.execute(f"select count(*) from tickq.{table}").fetchone()
    assert row is not None
    return int(row[0])


def run_one(store: PostgresStore, result: Any = None, *, fail: bool = False) -> UUID:
    """Claim exactly one job and end it."""
    (job,) = store.claim(limit=1)
    if fail:
        store.fail(job, "broken", permanent=True)
    else:
        store.complete(job, result)
    return job.id


def test_a_job_after_an_unfinished_parent_waits_and_is_never_claimed(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    a = queue_core.enqueue(conn, "extract")
    b = queue_core.enqueue(conn, "embed", after=[a.id])

    assert b.status == Status.WAITING
    assert [j.id for j in store.claim(limit=10)] == [a.id]
    assert store.claim(limit=10) == []


def test_the_last_parents_success_queues_the_child_in_the_same_statement(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    a = queue_core.enqueue(conn, "extract")
    b = queue_core.enqueue(conn, "embed", after=[str(a.id)])
    (job,) = store.claim()

    store.complete(job, {"chunks": 3})

    assert store.get(b.id).status == Status.QUEUED
    assert store.get(a.id).has_children
    assert store.parent_results(b.id) == {a.id: {"chunks": 3}}


def test_a_child_of_three_parents_runs_once_after_the_last(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    registry = Registry()
    ran: list[dict[UUID, Any]] = []

    @registry.task("part")
    def part(job: JobContext) -> int:
        return int(job.payload["n"])

    @registry.task("join")
    def join(job: JobContext) -> None:
        ran.append(job.parent_results)

    parents = [queue_core.enqueue(conn, "part", {"n": n}).id for n in range(3)]
    child = queue_core.enqueue(conn, "join", after=parents)

    with Runner(store, registry, batch_size=1) as runner:
        report = runner.tick()

    assert report.succeeded == 4
    assert ran == [{parents[0]: 0, parents[1]: 1, parents[2]: 2}]
    assert store.get(child.id).status == Status.SUCCEEDED


def test_parents_that_all_succeeded_already_leave_the_child_queued_at_once(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    a = queue_core.enqueue(conn, "extract")
    run_one(store, "done")

    b = queue_core.enqueue(conn, "embed", after=[a.id])

    assert b.status == Status.QUEUED
    assert store.parent_results(b.id) == {a.id: "done"}


def test_a_permanent_failure_cancels_child_and_grandchild_naming_the_parent(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    a = queue_core.enqueue(conn, "extract")
    b = queue_core.enqueue(conn, "embed", after=[a.id])
    c = queue_core.enqueue(conn, "reindex", after=[b.id])

    run_one(store, fail=True)

    for job_id in (b.id, c.id):
        job = store.get(job_id)
        assert job.status == Status.CANCELLED
        assert job.error == f"parent {a.id} is dead"
        assert job.attempts == 0 and job.finished_at is not None


def test_a_diamond_is_released_only_when_both_branches_succeed(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    results = queue_core.enqueue_many(
        conn,
        [
            {"type": "top"},
            {"type": "left", "after": [0]},
            {"type": "right", "after": [0]},
            {"type": "bottom", "after": [1, 2]},
        ],
    )
    top, left, right, bottom = (r.id for r in results)
    assert [r.status for r in results] == [Status.QUEUED] + [Status.WAITING] * 3

    run_one(store)
    assert {store.get(i).status for i in (left, right)} == {Status.QUEUED}
    run_one(store)
    assert store.get(bottom).status == Status.WAITING
    run_one(store)
    assert store.get(bottom).status == Status.QUEUED
    assert set(store.parent_results(bottom)) == {left, right}
    assert top in store.parent_results(left)


def test_cancelling_a_waiting_job_cancels_its_waiting_descendants(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    a = queue_core.enqueue(conn, "extract")
    b = queue_core.enqueue(conn, "embed", after=[a.id])
    c = queue_core.enqueue(conn, "reindex", after=[b.id])

    assert store.cancel(b.id).status == Status.CANCELLED

    assert store.get(c.id).status == Status.CANCELLED
    assert store.get(c.id).error == f"parent {b.id} is cancelled"
    assert store.get(a.id).status == Status.QUEUED


def test_a_parent_that_runs_out_of_leases_cancels_its_children(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    a = queue_core.enqueue(conn, "extract", max_attempts=1, lease_seconds=1)
    b = queue_core.enqueue(conn, "embed", after=[a.id])
    (job,) = store.claim()
    assert job.lease_until is not None

    (reclaimed,) = store.reclaim(now=job.lease_until)

    assert reclaimed.status == Status.DEAD
    assert store.get(b.id).status == Status.CANCELLED
    assert store.get(b.id).error == f"parent {a.id} is dead"


def test_a_waiting_job_holds_its_idempotency_key(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    a = queue_core.enqueue(conn, "extract")
    first = queue_core.enqueue(conn, "embed", after=[a.id], idempotency_key="k")

    again = queue_core.enqueue(conn, "embed", after=[a.id], idempotency_key="k")

    assert again.duplicate and again.id == first.id and again.status == Status.WAITING
    assert count(conn, "job_dependencies") == 1


def test_a_keyed_parent_in_the_same_call_that_is_a_duplicate_is_waited_for(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    existing = queue_core.enqueue(conn, "extract", idempotency_key="doc-1")
    run_one(store, "old")

    results = queue_core.enqueue_many(
        conn,
        [{"type": "extract", "idempotency_key": "doc-1"}, {"type": "embed", "after": [0]}],
    )

    assert results[0].duplicate and results[0].id == existing.id
    assert results[1].status == Status.QUEUED  # its parent had already succeeded
    assert store.parent_results(results[1].id) == {existing.id: "old"}


@pytest.mark.parametrize(
    "after, message",
    [
        (lambda a: [uuid4()], "not found"),
        (lambda a: "not-a-list", "must be a list of job ids"),
        (lambda a: ["nope"], "must be a UUID"),
        (lambda a: [uuid4() for _ in range(MAX_PARENTS + 1)], f"more than {MAX_PARENTS}"),
    ],
)
def test_bad_parents_are_refused_with_nothing_written(
    conn: psycopg.Connection, after: Any, message: str
) -> None:
    a = queue_core.enqueue(conn, "extract")

    with pytest.raises(InvalidJob, match=message):
        queue_core.enqueue(conn, "embed", after=after(a.id))

    assert count(conn) == 1 and count(conn, "job_dependencies") == 0


@pytest.mark.parametrize("fail", [True, False])
def test_a_dead_or_cancelled_parent_is_refused(
    conn: psycopg.Connection, store: PostgresStore, fail: bool
) -> None:
    a = queue_core.enqueue(conn, "extract")
    if fail:
        run_one(store, fail=True)
    else:
        store.cancel(a.id)

    with pytest.raises(InvalidParent, match="could never run") as refused:
        queue_core.enqueue(conn, "embed", after=[a.id])

    assert refused.value.parent_id == a.id
    assert count(conn) == 1 and not store.get(a.id).has_children


def test_another_users_job_is_not_found_as_a_parent(conn: psycopg.Connection) -> None:
    theirs = queue_core.enqueue(conn, "extract", user_id=uuid4())

    with pytest.raises(InvalidParent, match="not found"):
        queue_core.enqueue(conn, "embed", after=[theirs.id], user_id=uuid4())

    assert count(conn) == 1


@pytest.mark.parametrize("after", [[1], [0], [5], [-1]])
def test_enqueue_many_refuses_a_reference_to_itself_or_a_later_request(
    conn: psycopg.Connection, after: list[int]
) -> None:
    requests = [{"type": "a"}, {"type": "b", "after": after}, {"type": "c"}]
    if after == [0]:
        requests[0]["after"] = [0]

    with pytest.raises(InvalidJob, match="not an earlier request"):
        queue_core.enqueue_many(conn, requests)

    assert count(conn) == 0


def test_a_refused_dependent_enqueue_leaves_the_callers_transaction_usable(
    database_url: str, clean_tables: None
) -> None:
    with psycopg.connect(database_url) as conn:
        a = queue_core.enqueue(conn, "extract")
        with pytest.raises(InvalidParent):
            queue_core.enqueue(conn, "embed", after=[a.id, uuid4()])
        b = queue_core.enqueue(conn, "embed", after=[a.id])
        conn.commit()
    with psycopg.connect(database_url) as check:
        assert count(check) == 2 and count(check, "job_dependencies") == 1
        assert b.status == Status.WAITING


def test_a_dependent_enqueue_rolls_back_with_the_callers_transaction(
    database_url: str, clean_tables: None
) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        a = queue_core.enqueue(conn, "extract")
        with conn.transaction(force_rollback=True):
            queue_core.enqueue(conn, "embed", after=[a.id])
        assert count(conn) == 1 and count(conn, "job_dependencies") == 0


def test_retention_keeps_a_parent_while_its_child_is_unfinished(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    retention = Retention(conn)
    retention.set(policy(statuses=["succeeded", "dead"], keep_last=0))
    a = queue_core.enqueue(conn, "extract")
    queue_core.enqueue(conn, "embed", after=[a.id])
    run_one(store, "text")

    assert retention.prune(dry_run=True).deleted == 0
    assert retention.prune().deleted == 0
    assert store.get(a.id).status == Status.SUCCEEDED  # its child still needs its result

    run_one(store, fail=True)  # the child ends: nothing needs the parent any more
    assert retention.prune().deleted == 2
    assert count(conn) == 0 and count(conn, "job_dependencies") == 0


def test_a_cancelled_child_is_not_retried_while_its_parent_is_unfinished(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    a = queue_core.enqueue(conn, "extract")
    b = queue_core.enqueue(conn, "embed", after=[a.id])
    store.cancel(b.id)

    with pytest.raises(InvalidTransition, match=f"its parent {a.id} is queued"):
        store.retry(b.id)

    run_one(store, "text")
    assert store.retry(b.id).status == Status.QUEUED


def test_a_long_running_worker_runs_released_children_without_waiting_to_poll(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    registry = Registry()
    stop = threading.Event()
    ran: list[str] = []

    @registry.task("step")
    def step(job: JobContext) -> None:
        ran.append(job.payload["name"])
        if job.payload["name"] == "last":
            stop.set()

    first = queue_core.enqueue(conn, "step", {"name": "first"})
    second = queue_core.enqueue(conn, "step", {"name": "second"}, after=[first.id])
    queue_core.enqueue(conn, "step", {"name": "last"}, after=[second.id])

    started = time.monotonic()
    with Runner(store, registry) as runner:
        runner.work(stop=stop, poll_interval=60, listen=False)

    assert ran == ["first", "second", "last"]
    assert time.monotonic() - started < 30  # one idle poll would have taken 30 s or more


def test_a_released_child_keeps_its_queue_and_priority(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    a = queue_core.enqueue(conn, "extract")
    low = queue_core.enqueue(conn, "embed", queue="vectors", priority=1)
    high = queue_core.enqueue(conn, "embed", queue="vectors", priority=9, after=[a.id])
    run_one(store)

    claimed = store.claim(queues=["vectors"], limit=1)

    assert [job.id for job in claimed] == [high.id]
    assert store.get(low.id).status == Status.QUEUED


def test_a_waiting_job_keeps_its_fairness_group(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    owner = uuid4()
    a = queue_core.enqueue(conn, "extract", user_id=owner)
    by_owner = queue_core.enqueue(conn, "embed", user_id=owner, after=[a.id])
    given = queue_core.enqueue(conn, "embed", user_id=owner, group="tenant-7", after=[a.id])

    assert store.get(by_owner.id).group_key == str(owner)
    assert store.get(given.id).group_key == "tenant-7"
