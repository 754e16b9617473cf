"""The Postgres store as the model-based tests need it: deterministic.

Hypothesis replays a run by its choices, so the store must make no choice of its own: the
fair claim's first sweep starts at a fixed point instead of a random one, and whether a
queue holds several groups, and which queues are paused, are looked up at every claim
instead of cached for a few seconds of wall-clock time. Otherwise a replayed run can claim
other jobs, and hypothesis reports the test itself as flaky.
"""

from __future__ import annotations

from typing import Any

import psycopg

from queue_core.postgres import PostgresStore


def deterministic_store(conn: psycopg.Connection[Any]) -> PostgresStore:
    store = PostgresStore(conn, groups_ttl_seconds=0.0, rand=lambda: 0.5)
    store.paused.ttl_seconds = 0.0
    return store


# What other tests leave behind that changes what a store does: limits, holds and pauses. A model
# test's database is shared with the tests that ran before it in its process, and the
# fixtures empty tables before a test, not after.
SETTINGS = (
    "tickq.type_limits, tickq.queue_limits, tickq.queue_group_limits, tickq.queue_pauses,"
    " tickq.flow_limits, tickq.flow_holds, tickq.flow_starts"
)


def empty(conn: psycopg.Connection[Any], tables: str = "tickq.jobs") -> None:
    """Truncate `tables` (and what references them) with every limit and pause."""
    conn.execute(f"truncate {tables}, {SETTINGS} cascade")
