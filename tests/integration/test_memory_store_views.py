"""The in-memory store's shell views (console search, group stats) agree with PostgreSQL's
on the same jobs, so tests of what sits on the port see what production would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from queue_core import PostgresStore
from queue_core.console.jobs import JobFilter
from queue_core.model import transitions
from queue_core.model.validation import job_spec
from queue_core.store.memory import MemoryStore
from queue_core.store.port import Page, Store

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def fill(store: Store) -> None:
    """Three jobs of group a (one dead by a timeout, one running), then b, b, the shared
    group and a job of another queue: claims only while one group waits, so that the
    fair claim PostgreSQL takes across groups never differs from the memory's plain one."""
    for n in range(3):
        store.enqueue(job_spec("t", {"n": n}, group="a", max_attempts=1), now=at(n))
    first, _ = store.claim(limit=2, now=at(10))
    store.finish([transitions.failed(first, "Timeout talking to S3", permanent=True)], now=at(10))
    for n, group in ((3, "b"), (4, "b"), (5, None)):
        store.enqueue(job_spec("t", {"n": n}, group=group), now=at(8 + n))
    store.enqueue(job_spec("t", {"n": 6}, queue="gpu", group="a"), now=at(14))


def payloads(page: Page) -> list[Any]:
    return [job.payload["n"] for job in page.jobs]


def searched(store: Store, **filters: Any) -> list[Any]:
    return payloads(store.search_jobs(JobFilter.of(**filters).params()))


def test_search_and_group_stats_agree_between_memory_and_postgres(
    conn: psycopg.Connection,
) -> None:
    postgres, memory = PostgresStore(conn), MemoryStore(clock=lambda: at(20))
    for store in (postgres, memory):
        fill(store)

    for filters in (
        {},
        {"error": "TIMEOUT"},
        {"groups": ["a"]},
        {"statuses": ["queued"], "queues": ["default"]},
        {"created_from": at(11), "created_to": at(13)},
        {"types": ["t"], "statuses": ["running", "dead"]},
    ):
        assert searched(memory, **filters) == searched(postgres, **filters), filters
    assert memory.group_stats(now=at(20)) == postgres.group_stats(now=at(20))


def test_search_pages_agree_between_memory_and_postgres(conn: psycopg.Connection) -> None:
    postgres, memory = PostgresStore(conn), MemoryStore(clock=lambda: at(20))
    pages: dict[str, list[list[Any]]] = {}
    for name, store in (("postgres", postgres), ("memory", memory)):
        fill(store)
        cursor, pages[name] = None, []
        while True:
            page = store.search_jobs(JobFilter().params(), limit=3, cursor=cursor)
            pages[name].append(payloads(page))
            if page.next_cursor is None:
                break
            cursor = page.next_cursor

    assert pages["memory"] == pages["postgres"] == [[6, 5, 4], [3, 2, 1], [0]]
