"""Claim: best job first, nothing before its time, and never one job to two claimers."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from uuid import UUID

import psycopg

from queue_core import PostgresStore, Status
from queue_core.model import transitions
from queue_core.model.validation import job_spec

Connect = Callable[[], psycopg.Connection]
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def claim_one_by_one(store: PostgresStore, now: datetime) -> list[str]:
    names = []
    while jobs := store.claim(limit=1, now=now):
        names.append(jobs[0].payload["name"])
    return names


def test_claim_order_is_priority_desc_then_run_after_then_created_at(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    store.enqueue(job_spec("t", {"name": "low-newest"}), now=at(3))
    store.enqueue(job_spec("t", {"name": "low-oldest"}), now=at(1))
    store.enqueue(job_spec("t", {"name": "low-earliest-run"}, run_after=at(0)), now=at(2))
    store.enqueue(job_spec("t", {"name": "high"}, priority=10), now=at(4))
    store.enqueue(job_spec("t", {"name": "negative"}, priority=-1), now=at(0))

    order = claim_one_by_one(store, now=at(10))

    assert order == ["high", "low-earliest-run", "low-oldest", "low-newest", "negative"]


def test_a_batch_comes_back_in_claim_order(conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    for priority in (1, 5, 3, 4, 2):
        store.enqueue(job_spec("t", {"name": str(priority)}, priority=priority), now=at(0))

    jobs = store.claim(limit=3, now=at(1))

    assert [j.priority for j in jobs] == [5, 4, 3]


def test_a_job_whose_run_after_is_in_the_future_is_not_claimed(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    queued = store.enqueue(job_spec("t", delay=60), now=at(0))

    early = store.claim(now=at(59))
    on_time = store.claim(now=at(60))

    assert early == []
    assert [j.id for j in on_time] == [queued.id]


def test_a_claim_leases_the_job_with_a_fresh_token_and_counts_the_attempt(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    store.enqueue(job_spec("t"), now=at(0))

    (job,) = store.claim(lease_seconds=45, now=at(5))

    assert job.status == Status.RUNNING
    assert job.attempts == 1
    assert job.lease_token is not None
    assert job.lease_until == at(50)
    assert job.started_at == at(5)
    assert store.claim(now=at(6)) == []


def test_a_job_with_its_own_lease_keeps_it_whatever_the_worker_asks(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    store.enqueue(job_spec("t", lease_seconds=600), now=at(0))

    (job,) = store.claim(lease_seconds=5, now=at(0))

    assert job.lease_until == at(600)


def test_only_the_requested_queues_are_claimed(conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    for queue in ("default", "high", "low"):
        store.enqueue(job_spec("t", {"name": queue}, queue=queue), now=at(0))

    jobs = store.claim(queues=["high", "low"], now=at(1))

    assert sorted(j.queue for j in jobs) == ["high", "low"]


def test_finished_jobs_are_never_claimed(conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    done = store.enqueue(job_spec("t"), now=at(0))
    (job,) = store.claim(now=at(0))
    store.complete(job, now=at(1))
    cancelled = store.enqueue(job_spec("t"), now=at(0))
    store.cancel(cancelled.id, now=at(1))

    assert store.claim(now=at(100)) == []
    assert store.get(done.id).status == Status.SUCCEEDED


def test_concurrent_claimers_never_share_a_job_or_exceed_their_batch(
    conn: psycopg.Connection, connect: Connect
) -> None:
    jobs, workers, batch = 500, 8, 7
    PostgresStore(conn).enqueue_many([job_spec("t", {"n": n}) for n in range(jobs)], now=at(0))
    barrier = threading.Barrier(workers)
    claimed: list[list[UUID]] = [[] for _ in range(workers)]
    batch_sizes: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(index: int, connection: psycopg.Connection) -> None:
        store = PostgresStore(connection)
        try:
            barrier.wait(timeout=30)
            while got := store.claim(limit=batch, now=at(1)):
                claimed[index].extend(j.id for j in got)
                with lock:
                    batch_sizes.append(len(got))
        except BaseException as exc:  # surfaced by the assertion below
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, connect())) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    every = [job_id for ids in claimed for job_id in ids]
    assert len(every) == jobs
    assert Counter(every).most_common(1)[0][1] == 1
    assert max(batch_sizes) <= batch
    rows = conn.execute("select status, attempts, count(*) from tickq.jobs group by 1, 2")
    assert rows.fetchall() == [("running", 1, jobs)]


def test_a_claimed_job_reads_back_its_json_exactly(conn: psycopg.Connection) -> None:
    """Claims parse jsonb with their own loader (empty containers skip the parser): every
    shape must come back as json.loads would give it, and empty ones as fresh objects."""
    store = PostgresStore(conn)
    payloads = [
        {},
        {"text": "é ✓ \\u0000-free", "nested": {"list": [1, 2.5, None, True, {}], "empty": []}},
        {"big": "x" * 10_000},
    ]
    for n, payload in enumerate(payloads):  # apart in time, so the claim order is total
        store.enqueue(job_spec("t", payload), now=at(n / 1000))
    first = store.claim(limit=10, now=at(1))
    assert [job.payload for job in first] == payloads
    assert all(job.errors == [] and job.result is None for job in first)
    first[0].payload["mutated"] = True
    first[0].errors.append({"mutated": True})

    store.finish([transitions.failed(job, "boom") for job in first], now=at(2))
    again = store.claim(limit=10, now=at(1_000))
    assert [job.payload for job in again] == payloads  # nothing shared with the mutation
    assert [[e["error"] for e in job.errors] for job in again] == [["boom"]] * 3
