"""Durable workflows against a real database, run in-process by a Runner: children mapped
and awaited (enqueued once, cancelled and pruned with their parent, a failed one named),
undos in reverse order and exactly once across a crash, a step's own retries that leave
the job's attempts alone, and replay from a step."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest

from queue_core import (
    ChildFailed,
    JobContext,
    PermanentError,
    PostgresStore,
    Registry,
    Retry,
    Runner,
    Status,
    StepStore,
    TickReport,
)
from queue_core.errors import InvalidJob
from queue_core.policies.retention import Retention, RetentionPolicy
from queue_core.runner.durable_context import UNDO_TRIES

INSTANT = {"base": 0.001, "max": 0.001}
QUICK = Retry(3, base=0.001, max=0.001)


class Crash(BaseException):
    """Stands for the worker dying: the runner lets it through, leaving the lease behind."""


@pytest.fixture
def store(conn: psycopg.Connection) -> PostgresStore:
    return PostgresStore(conn)


@pytest.fixture
def registry() -> Registry:
    return Registry()


def enqueue(store: PostgresStore, registry: Registry, type_: str, **options: Any) -> UUID:
    return store.enqueue(registry.spec(type_, **options)).id


def run(store: PostgresStore, registry: Registry, job_id: UUID, *, most: int = 60) -> None:
    """Tick until the job has ended (waiting for wake times as the ticks need)."""
    with Runner(store, registry, rand=lambda: 0.0) as runner:
        for _ in range(most):
            try:
                runner.tick()
            except Crash:
                expire_lease(store, job_id)
            if store.get(job_id).is_terminal:
                return
            wake(store, job_id)
    raise AssertionError(f"job {job_id} did not end: {store.get(job_id)}")


def wake(store: PostgresStore, job_id: UUID) -> None:
    """Wake times in tests are milliseconds away: bring them to now (never a child wait)."""
    store._db.conn.execute(
        "update tickq.jobs set run_after = now() where status in ('queued', 'retrying')"
        " and run_after > now() and run_after < now() + interval '1 minute'"
    )


def expire_lease(store: PostgresStore, job_id: UUID) -> None:
    store._db.conn.execute(
        "update tickq.jobs set lease_until = now() - interval '1 second'"
        " where id = %s and status = 'running'",
        (job_id,),
    )


def children_of(conn: psycopg.Connection, type_: str) -> list[tuple[str, int]]:
    return conn.execute(
        "select status, count(*)::int from tickq.jobs where type = %s group by status",
        (type_,),
    ).fetchall()


def test_map_returns_the_children_results_in_order_and_enqueues_them_once(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    runs: list[str] = []

    @registry.task("parent")
    def parent(job: JobContext) -> list[Any]:
        runs.append("parent")
        return job.map("squares", "square", [{"n": n} for n in range(7)], max_concurrency=3)

    @registry.task("square")
    def square(job: JobContext) -> int:
        return int(job.payload["n"]) ** 2

    job_id = enqueue(store, registry, "parent")
    with Runner(store, registry) as runner:
        runner.run_batch(TickReport())
        # Woken before its children ended (a stray wake): the map looks, finds them
        # enqueued, and waits again without enqueueing more.
        conn.execute("update tickq.jobs set run_after = now() where id = %s", (job_id,))
        conn.execute(
            "update tickq.jobs set run_after = now() + interval '1 hour' where type = 'square'"
        )
        runner.run_batch(TickReport())
    assert children_of(conn, "square") == [("queued", 3), ("waiting", 4)]
    assert store.get(job_id).status == Status.QUEUED
    conn.execute("update tickq.jobs set run_after = now() where type = 'square'")

    run(store, registry, job_id)

    job = store.get(job_id)
    assert (job.status, job.result, job.attempts) == (
        Status.SUCCEEDED,
        [n * n for n in range(7)],
        1,
    )
    assert children_of(conn, "square") == [("succeeded", 7)]
    spawned = [r for r in store.relatives(job_id) if r.relation == "spawned"]
    assert len(spawned) == 7


def test_a_child_that_ends_dead_makes_the_map_raise_child_failed_naming_it(
    store: PostgresStore, registry: Registry
) -> None:
    seen: list[ChildFailed] = []

    @registry.task("parent")
    def parent(job: JobContext) -> Any:
        try:
            return job.map("work", "child", [{"n": n} for n in range(4)])
        except ChildFailed as exc:
            seen.append(exc)
            raise

    @registry.task("child")
    def child(job: JobContext) -> int:
        if job.payload["n"] == 2:
            raise PermanentError("no such chunk")
        return 1

    job_id = enqueue(store, registry, "parent")
    run(store, registry, job_id)

    job = store.get(job_id)
    assert job.status == Status.DEAD
    assert seen and (seen[0].index, seen[0].status) == (2, "dead")
    assert job.error is not None and "child 2" in job.error and "no such chunk" in job.error


def test_cancelling_a_waiting_parent_cancels_its_children_and_pruning_it_takes_them(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    @registry.task("parent")
    def parent(job: JobContext) -> Any:
        return job.map("work", "child", [{"n": n} for n in range(5)], max_concurrency=2)

    @registry.task("child")
    def child(job: JobContext) -> int:
        return 1

    job_id = enqueue(store, registry, "parent")
    with Runner(store, registry) as runner:
        runner.run_batch(TickReport())
    assert children_of(conn, "child") == [("queued", 2), ("waiting", 3)]

    store.cancel(job_id)

    assert children_of(conn, "child") == [("cancelled", 5)]
    Retention(conn).set(RetentionPolicy(None, "child", ("cancelled",), keep_last=0))
    Retention(conn).prune()
    assert children_of(conn, "child") == [("cancelled", 5)]  # not before their parent
    Retention(conn).set(RetentionPolicy(None, "parent", ("cancelled",), keep_last=0))
    Retention(conn).prune()
    assert children_of(conn, "child") == []
    (links,) = conn.execute("select count(*) from tickq.job_children").fetchone() or (0,)
    assert links == 0


def test_undos_run_in_reverse_order_once_each_though_the_worker_dies_during_one(
    store: PostgresStore, registry: Registry
) -> None:
    undone: list[str] = []
    crashed: list[bool] = []

    def undo_first(_: Any) -> None:
        if not crashed:
            crashed.append(True)
            raise Crash()
        undone.append("first")

    @registry.task("saga", max_attempts=1, backoff=INSTANT)
    def saga(job: JobContext) -> None:
        job.step("first", lambda: 1, undo=undo_first)
        job.step("second", lambda: 2, undo=lambda result: undone.append(f"second {result}"))
        job.step("third", lambda: 3, undo=lambda: undone.append("third"))
        job.step("fails", lambda: (_ for _ in ()).throw(PermanentError("out of stock")))

    job_id = enqueue(store, registry, "saga")
    run(store, registry, job_id)

    job = store.get(job_id)
    assert (job.status, job.error) == (Status.DEAD, "PermanentError: out of stock")
    assert undone == ["third", "second 2", "first"]
    view = StepStore(store).show(job_id).to_dict()
    assert [(u["name"], u["tries"]) for u in view["undone"]] == [
        ("third", 1),
        ("second", 1),
        ("first", 2),  # the crashed try counts
    ]


def test_an_undo_that_keeps_failing_leaves_the_job_dead_with_its_error(
    store: PostgresStore, registry: Registry
) -> None:
    tries: list[int] = []

    def refund(_: Any) -> None:
        tries.append(1)
        raise ConnectionError("the bank is down")

    @registry.task("saga", max_attempts=1, backoff=INSTANT)
    def saga(job: JobContext) -> None:
        job.step("charge", lambda: "ch_1", undo=refund)
        raise PermanentError("out of stock")

    job_id = enqueue(store, registry, "saga")
    run(store, registry, job_id)

    job = store.get(job_id)
    assert job.status == Status.DEAD
    assert len(tries) == UNDO_TRIES
    assert job.error == (
        f"undo of step 'charge' failed ({UNDO_TRIES} tries): ConnectionError: the bank is down"
    )


def test_a_step_retries_alone_and_spends_a_job_attempt_only_when_its_tries_run_out(
    store: PostgresStore, registry: Registry
) -> None:
    calls: list[int] = []

    @registry.task("flaky", max_attempts=2, backoff=INSTANT)
    def flaky(job: JobContext) -> None:
        def call() -> None:
            calls.append(job.attempt)
            raise TimeoutError("slow API")

        job.step("call", call, retry=Retry(2, base=0.001, max=0.001))

    job_id = enqueue(store, registry, "flaky")
    run(store, registry, job_id)

    job = store.get(job_id)
    assert (job.status, job.attempts) == (Status.DEAD, 2)
    assert calls == [1, 1, 2, 2]  # two tries per attempt of the job
    view = StepStore(store).show(job_id).to_dict()
    assert view["retrying_steps"][0]["tries"] == 4


def test_retry_from_a_step_forgets_it_and_every_later_step_and_keeps_the_earlier(
    store: PostgresStore, registry: Registry
) -> None:
    calls: list[str] = []
    fixed: list[bool] = []

    @registry.task("pipeline", max_attempts=1)
    def pipeline(job: JobContext) -> list[str]:
        def step(name: str) -> str:
            calls.append(name)
            if name == "c" and not fixed:
                raise PermanentError("bug in c")
            return name

        return [job.step(n, lambda n=n: step(n)) for n in ("a", "b", "c")]

    job_id = enqueue(store, registry, "pipeline")
    run(store, registry, job_id)
    assert store.get(job_id).status == Status.DEAD
    with pytest.raises(InvalidJob, match="no step 'z'"):
        StepStore(store).retry(job_id, fresh=False, from_step="z")
    assert store.get(job_id).status == Status.DEAD  # refused: nothing changed

    fixed.append(True)
    StepStore(store).retry(job_id, fresh=False, from_step="b")
    run(store, registry, job_id)

    job = store.get(job_id)
    assert (job.status, job.result) == (Status.SUCCEEDED, ["a", "b", "c"])
    assert calls == ["a", "b", "c", "b", "c"]


def test_a_map_that_would_overflow_its_queue_waits_for_room_without_spending_an_attempt(
    conn: psycopg.Connection, registry: Registry
) -> None:
    """The parent's queue has a maximum depth: the children are admitted as one enqueue in
    their statement's transaction, so a map that does not fit enqueues none, and the parent
    snoozes (its attempt given back) until there is room."""
    from queue_core.policies.limits import Limits, queue_limit

    @registry.task("part")
    def part(job: JobContext) -> int:
        return int(job.payload["n"])

    @registry.task("whole", backoff=INSTANT)
    def whole(job: JobContext) -> int:
        return sum(job.map("parts", "part", [{"n": n} for n in range(8)], max_concurrency=2))

    Limits(conn).set_queue(queue_limit("default", max_depth=5))
    store = PostgresStore(conn)  # its look at the limit tables sees the limit
    parent = enqueue(store, registry, "whole")
    with Runner(store, registry, rand=lambda: 0.0) as runner:
        report = runner.tick()

    snoozed = store.get(parent)
    assert (report.snoozed, snoozed.status, snoozed.error) == (1, Status.QUEUED, None)
    assert (snoozed.max_attempts, snoozed.attempts, snoozed.snoozes) == (
        registry.spec("whole").max_attempts,
        0,
        1,
    )  # the attempt given back, counted as a snooze
    assert conn.execute("select count(*) from tickq.jobs where type = 'part'").fetchone() == (0,)

    Limits(conn).set_queue(queue_limit("default", max_depth=20))
    roomy = PostgresStore(conn)
    try:
        run(roomy, registry, parent)
    finally:
        Limits(conn).clear_queue("default")  # tests that follow on this database expect none
    done = roomy.get(parent)
    assert (done.status, done.result, done.errors) == (Status.SUCCEEDED, 28, [])


def test_maps_of_one_batch_are_admitted_side_by_side_on_the_runners_connection(
    conn: psycopg.Connection, registry: Registry
) -> None:
    """The handlers of a batch share the runner's connection: parents mapping at the same
    moment into a limited queue each have their children admitted and enqueued by one
    statement, with no transaction of their own to interleave with another's."""
    import threading

    from queue_core.policies.limits import Limits, queue_limit

    owners = [uuid4() for _ in range(4)]
    together = threading.Barrier(8)
    first_runs: set[UUID] = set()

    @registry.task("part")
    def part(job: JobContext) -> int:
        return int(job.payload["n"])

    @registry.task("whole", backoff=INSTANT)
    def whole(job: JobContext) -> int:
        if job.id not in first_runs:  # the first run of each parent maps with the others
            first_runs.add(job.id)
            together.wait(timeout=10)
        return sum(job.map("parts", "part", [{"n": n} for n in range(3)]))

    Limits(conn).set_queue(queue_limit("default", max_depth=100, max_depth_per_owner=10))
    try:
        store = PostgresStore(conn)
        parents = [enqueue(store, registry, "whole", user_id=owners[n % 4]) for n in range(8)]
        with Runner(store, registry, rand=lambda: 0.0) as runner:
            report = TickReport()
            runner.run_batch(report)
        assert report.suspended == 8, report
        for parent in parents:
            run(store, registry, parent)
    finally:
        Limits(conn).clear_queue("default")
    done = [store.get(parent) for parent in parents]
    assert {(j.status, j.result, len(j.errors)) for j in done} == {(Status.SUCCEEDED, 3, 0)}


def test_a_map_counts_its_children_against_the_owners_depth_cap_of_its_queue(
    conn: psycopg.Connection, registry: Registry
) -> None:
    """The parent's queue caps each owner's live jobs: a map's children are the parent's
    owner's, counted in their statement's transaction with the parent itself, so a map
    that would pass the cap enqueues none and its parent snoozes (its attempt given back);
    another owner's jobs leave room for it, and a map of a job without an owner pays none."""
    from queue_core.policies.limits import Limits, queue_limit

    alice, bob = uuid4(), uuid4()

    @registry.task("part")
    def part(job: JobContext) -> int:
        return int(job.payload["n"])

    @registry.task("whole", backoff=INSTANT)
    def whole(job: JobContext) -> int:
        return sum(job.map("parts", "part", [{"n": n} for n in range(8)]))

    def live(owner: UUID | None) -> int:
        row = conn.execute(
            "select count(*) from tickq.jobs where user_id is not distinct from %s"
            " and status in ('waiting', 'queued', 'running', 'retrying')",
            (owner,),
        ).fetchone()
        assert row is not None
        return int(row[0])

    # The parent and its eight children are nine live jobs of alice's: a cap of 8 refuses.
    Limits(conn).set_queue(queue_limit("default", max_depth_per_owner=8))
    store = PostgresStore(conn)  # its look at the limit tables sees the limit
    for _ in range(5):
        enqueue(store, registry, "part", payload={"n": 0}, user_id=bob)
    parent = enqueue(store, registry, "whole", user_id=alice)
    try:
        with Runner(store, registry, rand=lambda: 0.0) as runner:
            report = runner.tick()
        snoozed = store.get(parent)
        assert (report.snoozed, snoozed.status, snoozed.error) == (1, Status.QUEUED, None)
        assert (snoozed.max_attempts, snoozed.attempts, snoozed.snoozes) == (
            registry.spec("whole").max_attempts,
            0,
            1,
        )  # the attempt given back, counted as a snooze
        assert (live(alice), live(bob)) == (1, 0)  # bob's parts ran; alice's map enqueued none

        # Without an owner the cap is no one's: the map goes in and runs.
        ownerless = enqueue(store, registry, "whole")
        run(store, registry, ownerless)
        assert store.get(ownerless).result == 28

        # Nine fit a cap of 9 exactly.
        Limits(conn).set_queue(queue_limit("default", max_depth_per_owner=9))
        roomy = PostgresStore(conn)
        with Runner(roomy, registry, rand=lambda: 0.0) as runner:
            conn.execute("update tickq.jobs set run_after = now() where id = %s", (parent,))
            runner.run_batch(TickReport())
        assert live(alice) == 9
        run(roomy, registry, parent)
    finally:
        Limits(conn).clear_queue("default")  # tests that follow on this database expect none
    done = roomy.get(parent)
    assert (done.status, done.result, done.errors) == (Status.SUCCEEDED, 28, [])
