"""The batch statement finds the jobs it finishes through the id index alone.

jobs_lease_idx (running jobs by lease expiry) keeps an entry for every job that ever ran
until VACUUM removes it; a finish that ANDs it with the primary key walks them all, a cost
that grows with the finished jobs since the last vacuum (tickq.jobs_live's id index is the
copy of jobs_id_idx on the live partition, schema/tables.sql). The plans are read with EXPLAIN
beside a few thousand unvacuumed finished jobs, where the planner took that index.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from queue_core import PostgresStore, Registry, Runner
from queue_core.model import transitions
from queue_core.postgres.claim import outcome_params
from queue_core.postgres.statements import QUERIES

FINISHES = ("jobs_finish_and_claim", "jobs_finish_and_claim_queues", "jobs_finish_and_claim_fair")


def index_names(plan: Any) -> set[str]:
    """Every index a JSON plan reads, at any depth."""
    if isinstance(plan, dict):
        found = {plan["Index Name"]} if "Index Name" in plan else set()
        return found.union(*(index_names(value) for value in plan.values()))
    if isinstance(plan, list):
        return set().union(*(index_names(item) for item in plan))
    return set()


@pytest.fixture
def unvacuumed(conn: psycopg.Connection) -> Iterator[None]:
    """No autovacuum on the live jobs' partition while the test runs (its dead entries
    stay); a partitioned table takes no storage settings of its own."""
    conn.execute("alter table tickq.jobs_live set (autovacuum_enabled = false)")
    try:
        yield
    finally:
        conn.execute("alter table tickq.jobs_live reset (autovacuum_enabled)")


@pytest.mark.parametrize("statement", FINISHES)
def test_the_finish_never_walks_the_lease_index(
    conn: psycopg.Connection, unvacuumed: None, statement: str
) -> None:
    # Given 3,000 finished jobs, not vacuumed, and a batch of 10 running jobs
    registry = Registry()
    registry.task("noop")(lambda job: None)
    store = PostgresStore(conn)
    store.enqueue_many([registry.spec("noop") for _ in range(3000)])
    with Runner(store, registry, batch_size=100, concurrency=1) as runner:
        assert runner.tick().succeeded == 3000
    conn.execute("analyze tickq.jobs")
    store.enqueue_many([registry.spec("noop") for _ in range(20)])
    jobs = store.claim(limit=10)
    params = {
        **outcome_params([transitions.succeeded(job) for job in jobs]),
        "queue": "default",
        "queues": ["default"],
        "limit": 10,
        "lease_seconds": 30,
        "now": None,
        "after": None,
        "positions": [],
        "seed": None,
    }

    # When the statement that finishes them is planned and run (then rolled back)
    with conn.transaction(force_rollback=True):
        (plan,) = conn.execute(
            f"explain (analyze, format json) {QUERIES[statement]}", params
        ).fetchone()  # type: ignore[misc]

    # Then it probes the live partition's id index and reads nothing of jobs_lease_idx
    plan = plan if isinstance(plan, list) else json.loads(plan)
    assert "jobs_live_id_idx" in index_names(plan)
    assert "jobs_lease_idx" not in index_names(plan), json.dumps(plan)[:2000]
