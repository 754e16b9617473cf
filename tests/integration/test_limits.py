"""Per-type caps and rates enforced inside the claim, and per-queue depth at enqueue."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from queue_core import JobBatch
from queue_core.errors import InvalidJob, QueueFull
from queue_core.model.validation import job_spec
from queue_core.policies.limits import LimitNotFound, Limits, parse_rate, queue_limit, type_limit
from queue_core.postgres import PostgresStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def enqueue(conn, type_: str, n: int, *, priority: int = 0, queue: str = "default", now=T0) -> None:
    """Jobs runnable from just before `now` (None: the database clock, for real-time races)."""
    specs = [job_spec(type_, {"i": i}, priority=priority, queue=queue) for i in range(n)]
    PostgresStore(conn).enqueue_many(specs, now=None if now is None else now - timedelta(seconds=1))


def running(conn, type_: str) -> int:
    row = conn.execute(
        "select count(*) from tickq.jobs where type = %s and status = 'running'", (type_,)
    ).fetchone()
    return int(row[0])


def test_limits_configured_says_whether_any_type_or_queue_limit_exists(conn):
    store = PostgresStore(conn)
    assert not store.limits_configured().types
    assert not store.limits_configured().queues
    Limits(conn).set_type(type_limit("embed", max_running=1))
    assert PostgresStore(conn).limits_configured().types
    assert not PostgresStore(conn).limits_configured().queues
    Limits(conn).set_queue(queue_limit("bulk", max_depth=1))
    assert PostgresStore(conn).limits_configured().queues


def test_a_capped_type_at_the_head_of_the_queue_does_not_starve_the_others(conn):
    Limits(conn).set_type(type_limit("embed", max_running=3))
    enqueue(conn, "embed", 20, priority=10)
    enqueue(conn, "mail", 5)

    claimed = PostgresStore(conn).claim(limit=10, now=T0)

    kinds = [job.type for job in claimed]
    assert kinds.count("embed") == 3
    assert kinds.count("mail") == 5


def test_a_finished_job_frees_its_slot_under_the_cap(conn):
    Limits(conn).set_type(type_limit("embed", max_running=2))
    enqueue(conn, "embed", 5)
    store = PostgresStore(conn)
    first = store.claim(limit=5, now=T0)
    assert len(first) == 2
    assert store.claim(limit=5, now=T0) == []

    store.complete(first[0], {"ok": True}, now=T0)

    assert len(store.claim(limit=5, now=T0)) == 1


def test_rate_limit_admits_at_most_r_starts_in_any_window(conn):
    Limits(conn).set_type(type_limit("call", rate_limit=5, rate_period_seconds=1.0))
    enqueue(conn, "call", 30)
    store = PostgresStore(conn)

    def claim_at(seconds: float) -> int:
        jobs = store.claim(limit=10, now=T0 + timedelta(seconds=seconds))
        for job in jobs:
            store.complete(job, None, now=T0 + timedelta(seconds=seconds))
        return len(jobs)

    assert claim_at(0.0) == 5
    assert claim_at(0.5) == 0
    assert claim_at(0.99) == 0
    # A start leaves the window exactly one period later.
    assert claim_at(1.0) == 5
    assert claim_at(1.2) == 0


def test_rate_limit_counts_starts_spread_through_the_window(conn):
    Limits(conn).set_type(type_limit("call", rate_limit=4, rate_period_seconds=10.0))
    enqueue(conn, "call", 20)
    store = PostgresStore(conn)
    assert len(store.claim(limit=1, now=T0)) == 1
    assert len(store.claim(limit=2, now=T0 + timedelta(seconds=4))) == 2
    assert len(store.claim(limit=5, now=T0 + timedelta(seconds=8))) == 1
    # At t=10 the start at t=0 has left the window; those at 4 and 8 still count.
    assert len(store.claim(limit=5, now=T0 + timedelta(seconds=10))) == 1


def test_eight_concurrent_claimers_never_run_more_than_the_cap(conn, connect):
    cap, jobs_per_type, claimers = 3, 60, 8
    Limits(conn).set_type(type_limit("embed", max_running=cap))
    enqueue(conn, "embed", jobs_per_type, now=None)
    enqueue(conn, "other", jobs_per_type, now=None)
    stop = threading.Event()
    seen: list[int] = []
    errors: list[BaseException] = []

    def watch() -> None:
        # Checked continuously from a separate connection, not only at the end.
        monitor = connect()
        while not stop.is_set():
            seen.append(running(monitor, "embed"))

    def claim_loop() -> None:
        try:
            store = PostgresStore(connect())
            give_up = time.monotonic() + 60
            while not stop.is_set() and time.monotonic() < give_up:
                jobs = store.claim(limit=2)
                if not jobs:
                    if store.conn.execute(
                        "select not exists (select from tickq.jobs where status <> 'succeeded')"
                    ).fetchone()[0]:
                        return
                    time.sleep(0.002)
                    continue
                seen.append(running(store.conn, "embed"))
                time.sleep(0.01)  # the handler's work, while holding the slot
                for job in jobs:
                    store.complete(job, None)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    watcher = threading.Thread(target=watch)
    workers = [threading.Thread(target=claim_loop) for _ in range(claimers)]
    watcher.start()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    stop.set()
    watcher.join()

    assert not errors
    done = conn.execute("select count(*) from tickq.jobs where status = 'succeeded'").fetchone()
    assert done[0] == 2 * jobs_per_type
    assert len(seen) > 100
    assert max(seen) <= cap
    assert max(seen) == cap  # the cap was actually reached: the race was exercised


def test_concurrent_claimers_keep_the_rate_within_every_window(conn, connect):
    rate, period = 5, 0.5
    Limits(conn).set_type(type_limit("call", rate_limit=rate, rate_period_seconds=period))
    enqueue(conn, "call", 40, now=None)
    deadline = time.monotonic() + 1.6
    errors: list[BaseException] = []

    def claim_loop() -> None:
        try:
            store = PostgresStore(connect())
            while time.monotonic() < deadline:
                for job in store.claim(limit=3):
                    store.complete(job, None)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=claim_loop) for _ in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert not errors
    starts = sorted(
        row[0]
        for row in conn.execute("select started_at from tickq.jobs where started_at is not null")
    )
    window = timedelta(seconds=period)
    assert len(starts) >= 2 * rate  # more than one window's worth started, so windows rolled
    for i, at in enumerate(starts):
        in_window = sum(1 for other in starts[: i + 1] if other > at - window)
        assert in_window <= rate, f"{in_window} starts in the {period} s before {at}"


def test_enqueue_beyond_the_maximum_depth_is_refused_and_writes_nothing(conn):
    Limits(conn).set_queue(queue_limit("bulk", max_depth=5))
    store = PostgresStore(conn)
    store.enqueue_many([job_spec("t", queue="bulk") for _ in range(3)])

    with pytest.raises(QueueFull) as refused:
        store.enqueue_many([job_spec("t", queue="bulk") for _ in range(3)])

    assert (refused.value.queue, refused.value.depth, refused.value.limit) == ("bulk", 3, 5)
    assert conn.execute("select count(*) from tickq.jobs").fetchone()[0] == 3
    store.enqueue_many([job_spec("t", queue="bulk") for _ in range(2)])
    with pytest.raises(QueueFull):
        store.enqueue(job_spec("t", queue="bulk"))
    # Other queues are not limited by it.
    store.enqueue(job_spec("t", queue="default"))
    assert conn.execute("select count(*) from tickq.jobs").fetchone()[0] == 6


def test_a_refused_enqueue_inside_a_transaction_leaves_the_callers_earlier_writes_alone(conn):
    Limits(conn).set_queue(queue_limit("bulk", max_depth=1))
    store = PostgresStore(conn)
    with conn.transaction():
        store.enqueue(job_spec("t", queue="default"))
        with pytest.raises(QueueFull):
            store.enqueue_many([job_spec("t", queue="bulk") for _ in range(2)])
    assert conn.execute("select queue from tickq.jobs").fetchall() == [("default",)]


def test_concurrent_enqueuers_never_overfill_a_queue(conn, connect):
    Limits(conn).set_queue(queue_limit("bulk", max_depth=20))
    refused = [0]
    lock = threading.Lock()

    def enqueue_loop() -> None:
        store = PostgresStore(connect())
        for _ in range(10):
            try:
                store.enqueue(job_spec("t", queue="bulk"))
            except QueueFull:
                with lock:
                    refused[0] += 1

    workers = [threading.Thread(target=enqueue_loop) for _ in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert conn.execute("select count(*) from tickq.jobs").fetchone()[0] == 20
    assert refused[0] == 40


def test_limits_are_listed_changed_and_cleared(conn):
    limits = Limits(conn)
    limits.set_type(type_limit("embed", max_running=5))
    limits.set_type(type_limit("embed", max_running=2, rate_limit=10, rate_period_seconds=60))
    limits.set_queue(queue_limit("bulk", max_depth=100))
    enqueue(conn, "embed", 1, queue="bulk")

    [embed] = limits.types()
    assert (embed.max_running, embed.rate_limit, embed.rate_period_seconds) == (2, 10, 60.0)
    assert [(q.queue, q.max_depth, q.waiting) for q in limits.queues()] == [("bulk", 100, 1)]
    limits.clear_type("embed")
    limits.clear_queue("bulk")
    assert limits.types() == [] and limits.queues() == []
    with pytest.raises(LimitNotFound):
        limits.clear_type("embed")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5/s", (5, 1.0)),
        ("100/min", (100, 60.0)),
        ("10/30s", (10, 30.0)),
        ("1 / hour", (1, 3600.0)),
    ],
)
def test_rates_are_parsed(text, expected):
    assert parse_rate(text) == expected


@pytest.mark.parametrize("text", ["5", "five/s", "5/fortnight", "0/s", "5/0s", "", None])
def test_bad_rates_are_refused(text):
    with pytest.raises(InvalidJob):
        parse_rate(text)


@pytest.mark.parametrize(
    "options",
    [{}, {"max_running": 0}, {"max_running": True}, {"rate_limit": 5}, {"max_running": "3"}],
)
def test_bad_type_limits_are_refused(options):
    with pytest.raises(InvalidJob):
        type_limit("embed", **options)


def test_the_maximum_depth_counts_jobs_waiting_for_parents(conn):
    Limits(conn).set_queue(queue_limit("bulk", max_depth=2))
    store = PostgresStore(conn)
    parent = store.enqueue(job_spec("t")).id
    batch = JobBatch.of([job_spec("t", queue="bulk") for _ in range(2)])
    store.enqueue_after(batch, [(parent,)] * 2)

    with pytest.raises(QueueFull):
        store.enqueue(job_spec("t", queue="bulk"))
    assert [(q.queue, q.waiting) for q in Limits(conn).queues()] == [("bulk", 2)]
