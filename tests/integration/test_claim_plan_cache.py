"""A worker's claim statement is planned once, not on every execution.

psycopg prepares a statement after a few executions, and PostgreSQL then chooses per
execution between one generic plan and a plan of its own for the values given. A limit the
planner can see made every execution's own plan look several times cheaper than the generic
one (10 jobs against a tenth of a backlog of thousands), so each statement was planned
again: about a millisecond of the server's time, half of a small batch's statement. The
claim reads its limit through a subquery, priced alike both ways; pg_prepared_statements
counts the plans.
"""

from __future__ import annotations

import os

import psycopg
import pytest

from queue_core import PostgresStore, Registry
from queue_core.model import transitions

EXECUTIONS = 30


def plan_counts(conn: psycopg.Connection, marker: str) -> tuple[int, int]:
    """(generic, custom) plans of the prepared statements whose text holds `marker`."""
    row = conn.execute(
        "select coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)"
        " from pg_prepared_statements where statement like %s",
        (f"%{marker}%",),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@pytest.mark.parametrize("queues", [["default"], ["default", "other"]], ids=["one", "several"])
def test_the_claim_keeps_one_generic_plan(
    database_url: str, clean_tables: None, queues: list[str]
) -> None:
    # Given a backlog of 24,000 jobs in two queues, and a worker's connection that
    # prepares statements at once
    registry = Registry()
    registry.task("noop")(lambda job: None)
    registry.task("other", queue="other")(lambda job: None)
    with psycopg.connect(database_url, autocommit=True, prepare_threshold=0) as conn:
        store = PostgresStore(conn)
        store.enqueue_many([registry.spec("noop") for _ in range(20000)])
        store.enqueue_many([registry.spec("other") for _ in range(4000)])
        conn.execute("analyze tickq.jobs_live")

        # When the worker finishes and claims small batches, as a busy worker does
        outcomes: list = []
        claimed_total = 0
        for _ in range(EXECUTIONS):
            _, claimed = store.finish_and_claim_unparsed(
                outcomes, queues=queues, limit=5, lease_seconds=30, seed=os.urandom(16)
            )
            jobs = claimed.jobs()
            claimed_total += len(jobs)
            outcomes = [transitions.succeeded(job) for job in jobs]

        # Then it claimed a batch each time, and the statement had plans of its own only
        # in the first few executions, which PostgreSQL plans before it compares (five,
        # and one more on the first claim): every later execution reused the generic plan
        assert claimed_total == 5 * EXECUTIONS
        generic, custom = plan_counts(conn, "tickq.jobs_lease(")
        assert custom <= 8, (generic, custom)
        assert generic >= EXECUTIONS - 8, (generic, custom)
