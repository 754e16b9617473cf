"""Listing and stats: filters, keyset pagination without gaps or repeats, queue health."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import psycopg
import pytest

from queue_core import PostgresStore, Status
from queue_core.model.validation import job_spec

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


def test_a_listing_shows_small_values_and_leaves_out_large_ones_by_their_stored_size(
    store: PostgresStore, conn: psycopg.Connection
) -> None:
    """What lists show (jobs_search_listed): a value small both as stored and as JSON text
    whole; a large one, one that compressed well, and a few stored bytes that render long
    (a number of 4,001 digits) as null, named in "truncated" with their stored bytes; the
    error cut to 200 characters. The operator's list (tickq.operator_jobs) follows the same
    rule for what it shows."""
    from queue_core.console.jobs import JobFilter, OperatorConsole
    from queue_core.model.pages import LIST_ERROR_CHARS

    small = store.enqueue(job_spec("t", {"text": "a" * 500}), now=at(0)).id
    large = store.enqueue(job_spec("t", {"text": "ü" * 5000}), now=at(1)).id
    squeezed = store.enqueue(job_spec("t", {"text": "ab" * 40_000}), now=at(2)).id
    digits = store.enqueue(job_spec("t"), now=at(3)).id
    conn.execute(
        "update tickq.jobs set payload = '{\"n\": 1e4000}', progress = '{\"done\": 1}',"
        " result = %s, error = %s where id = %s",
        (json.dumps("é" * 2000), "✓" * (LIST_ERROR_CHARS + 1), digits),
    )
    conn.execute(
        "update tickq.jobs set progress = to_jsonb(repeat('x', 2000)), error = %s where id = %s",
        ("✓" * LIST_ERROR_CHARS, small),
    )
    stored = dict(
        conn.execute(
            "select id, jsonb_build_object('payload', pg_column_size(payload),"
            " 'compressed', pg_column_compression(payload) is not null,"
            " 'result', pg_column_size(result), 'progress', pg_column_size(progress))"
            " from tickq.jobs"
        ).fetchall()
    )
    assert stored[squeezed]["compressed"] and stored[squeezed]["payload"] < 1024
    assert stored[digits]["payload"] < 1024

    page = store.search_listed(JobFilter().params())
    shown = {UUID(j["id"]): j for j in page.jobs}

    assert shown[small]["payload"] == {"text": "a" * 500} and shown[small]["progress"] is None
    assert shown[small]["error"] == "✓" * LIST_ERROR_CHARS
    assert shown[small]["truncated"] == {"progress": stored[small]["progress"]}
    for left_out in (large, squeezed, digits):
        assert shown[left_out]["payload"] is None
        assert shown[left_out]["truncated"]["payload"] == stored[left_out]["payload"]
    assert shown[digits]["progress"] == {"done": 1} and shown[digits]["result"] is None
    assert shown[digits]["error"] == "✓" * LIST_ERROR_CHARS
    assert shown[digits]["truncated"] == {
        "payload": stored[digits]["payload"],
        "result": stored[digits]["result"],
        "error": 3 * (LIST_ERROR_CHARS + 1),
    }
    assert shown[large]["truncated"] == {"payload": stored[large]["payload"]}
    assert store.get(digits).result == "é" * 2000  # the job's own view has it whole

    operator = {UUID(j["id"]): j for j in OperatorConsole(conn).jobs(JobFilter()).jobs}
    assert operator[small]["progress"] is None
    assert operator[small]["truncated"] == {"progress": stored[small]["progress"]}
    assert operator[digits]["error"] == "✓" * LIST_ERROR_CHARS
    assert operator[digits]["truncated"] == {"error": 3 * (LIST_ERROR_CHARS + 1)}
    assert operator[large]["truncated"] == {}
