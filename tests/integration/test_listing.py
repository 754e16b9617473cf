"""Listing and stats: filters, keyset pagination without gaps or repeats, queue health."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import psycopg
import pytest

from queue_core import PostgresStore, Status
from queue_core.validation import job_spec

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def store(conn: psycopg.Connection) -> PostgresStore:
    return PostgresStore(conn)


def test_list_is_newest_first(store: PostgresStore) -> None:
    ids = [store.enqueue(job_spec("t"), now=at(n)).id for n in range(3)]

    listed = [j.id for j in store.list_jobs().jobs]

    assert listed == ids[::-1]


def test_list_filters_by_status_type_queue_and_owner(store: PostgresStore) -> None:
    alice = uuid4()
    embed = store.enqueue(job_spec("embed", queue="gpu", user_id=alice)).id
    store.enqueue(job_spec("transcribe"))
    cancelled = store.enqueue(job_spec("transcribe", queue="gpu")).id
    store.cancel(cancelled)

    def ids(**filters: object) -> set[UUID]:
        return {j.id for j in store.list_jobs(**filters).jobs}  # type: ignore[arg-type]

    assert ids(statuses=["cancelled"]) == {cancelled}
    assert ids(types=["embed"]) == {embed}
    assert ids(queues=["gpu"]) == {embed, cancelled}
    assert ids(user_id=alice) == {embed}
    assert ids(types=["transcribe"], queues=["gpu"], statuses=["queued"]) == set()
    assert len(ids(statuses=["queued", "cancelled"])) == 3


def test_pages_cover_every_job_once_even_when_created_at_ties(store: PostgresStore) -> None:
    # One bulk insert gives 20 jobs the same created_at: the id must break the tie.
    store.enqueue_many([job_spec("t", {"n": n}) for n in range(20)], now=at(0))
    for n in range(20, 33):
        store.enqueue(job_spec("t", {"n": n}), now=at(n))
    expected = [j.id for j in store.list_jobs(limit=500).jobs]

    pages: list[list[UUID]] = []
    cursor = None
    while True:
        page = store.list_jobs(limit=7, cursor=cursor)
        pages.append([j.id for j in page.jobs])
        cursor = page.next_cursor
        if cursor is None:
            break

    flat = [job_id for page in pages for job_id in page]
    assert flat == expected
    assert len(flat) == len(set(flat)) == 33
    assert [len(p) for p in pages] == [7, 7, 7, 7, 5]


def test_the_last_full_page_has_no_next_cursor(store: PostgresStore) -> None:
    store.enqueue_many([job_spec("t") for _ in range(4)])

    first = store.list_jobs(limit=2)
    second = store.list_jobs(limit=2, cursor=first.next_cursor)

    assert first.next_cursor is not None
    assert len(second.jobs) == 2
    assert second.next_cursor is None


def test_pagination_is_stable_while_new_jobs_arrive(store: PostgresStore) -> None:
    old = [store.enqueue(job_spec("t"), now=at(n)).id for n in range(6)]
    first = store.list_jobs(limit=3)

    store.enqueue(job_spec("t"), now=at(100))
    second = store.list_jobs(limit=3, cursor=first.next_cursor)

    assert [j.id for j in first.jobs + second.jobs] == old[::-1]


def test_stats_count_jobs_per_queue_type_and_status(store: PostgresStore) -> None:
    store.enqueue_many([job_spec("embed") for _ in range(3)], now=at(0))
    store.enqueue(job_spec("embed", queue="gpu"), now=at(0))
    store.enqueue(job_spec("transcribe", priority=1), now=at(0))
    (job,) = store.claim(limit=1, now=at(0))
    store.complete(job, now=at(1))

    counts = {(r.queue, r.type, r.status): r.count for r in store.stats(now=at(10))}

    assert counts == {
        ("default", "embed", Status.QUEUED): 3,
        ("default", "transcribe", Status.SUCCEEDED): 1,
        ("gpu", "embed", Status.QUEUED): 1,
    }


def test_stats_report_the_age_of_the_oldest_runnable_job(store: PostgresStore) -> None:
    store.enqueue(job_spec("embed", run_after=at(-100)), now=at(-200))
    store.enqueue(job_spec("embed", run_after=at(-40)), now=at(-200))
    store.enqueue(job_spec("embed", run_after=at(50)), now=at(-200))
    store.enqueue(job_spec("later", run_after=at(50)), now=at(-200))

    rows = {r.type: r for r in store.stats(now=at(0))}

    assert rows["embed"].count == 3
    assert rows["embed"].oldest_runnable_seconds == pytest.approx(100)
    assert rows["later"].oldest_runnable_seconds is None


def test_stats_of_an_empty_queue_are_empty(store: PostgresStore) -> None:
    assert store.stats() == []
