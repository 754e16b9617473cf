"""The drain's plans follow the live partition's size, not the statistics it had when empty.

tickq.jobs_live is small and is often analyzed while the queue is empty. Without statistics
on its ids, a lookup of ten ids was estimated at 5 % of the partition, and the generic plans
cached by prepared statements and by PL/pgSQL (the fair claim) scanned the partition in full
for every batch once a backlog arrived. The unique index of migration 0015 tells the planner
an id finds at most one row.
"""

from __future__ import annotations

import psycopg
import pytest

from queue_core import PostgresStore, Registry, Runner

BACKLOG = 3000
BATCH = 10


def live_seq_scans(conn: psycopg.Connection) -> int:
    conn.execute("select pg_stat_force_next_flush()")
    row = conn.execute(
        "select seq_scan from pg_stat_user_tables where relid = 'tickq.jobs_live'::regclass"
    ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("groups", [1, 2], ids=["plain claim", "fair claim"])
def test_a_backlog_that_arrives_after_an_empty_analyze_is_drained_through_indexes(
    conn: psycopg.Connection, database_url: str, groups: int
) -> None:
    # Given statistics that say the live partition is empty, then a backlog
    conn.execute("vacuum analyze tickq.jobs_live")
    conn.execute(
        "insert into tickq.jobs (type, group_key)"
        " select 'noop', (g %% %s)::text from generate_series(1, %s) g",
        (groups, BACKLOG),
    )
    registry = Registry()
    registry.task("noop")(lambda job: None)

    # When one worker drains it at batch 10, far past the five runs a plan cache waits for
    with psycopg.connect(database_url, autocommit=True) as worker:
        before = live_seq_scans(worker)
        with Runner(PostgresStore(worker), registry, batch_size=BATCH, concurrency=1) as runner:
            report = runner.tick()
        scans = live_seq_scans(worker) - before

    # Then every job ran, and the partition was not read in full batch after batch (with the
    # plain id index of 0014, the cached plans scanned it once or twice per batch: 315 to 602)
    assert report.succeeded == BACKLOG
    batches = BACKLOG // BATCH
    assert scans < batches // 5, f"{scans} sequential scans of jobs_live in {batches} batches"
