"""A backlog that arrives after the live partition was analyzed empty is never scanned whole.

With no statistics on tickq.jobs_live's ids, the planner takes a lookup of ten ids for 5 %
of the partition, and the generic plans of the prepared batch statements (after their
sixth run) and of the claim functions' plan cache scanned jobs_live once or twice per
batch. tickq.jobs_live_id_statistics gives the ids a pg_statistic row that says they are
distinct, which an empty ANALYZE, VACUUM and TRUNCATE leave in place. Each test starts from
a freshly migrated database, the only place the statistics are known to be missing, with
autovacuum off on jobs_live so nothing analyzes it behind the test's back.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from queue_core import PostgresStore, Registry, Runner
from queue_core.migrate import migrate
from queue_core.policies.limits import Limits, type_limit

BACKLOG = 3000  # 300 batches of 10: far past the sixth run, where generic plans start


@pytest.fixture
def migrated(fresh_database_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(fresh_database_url, autocommit=True) as conn:
        migrate(conn)
        conn.execute("alter table tickq.jobs_live set (autovacuum_enabled = false)")
        yield conn


def live_sequential_scans(conn: psycopg.Connection) -> int:
    """jobs_live's sequential scans so far, this session's included."""
    conn.execute("select pg_stat_force_next_flush()")
    conn.execute("select pg_stat_clear_snapshot()")
    row = conn.execute(
        "select seq_scan from pg_stat_user_tables where relid = 'tickq.jobs_live'::regclass"
    ).fetchone()
    assert row is not None
    return int(row[0])


def id_statistics(conn: psycopg.Connection) -> list[tuple[float]]:
    return conn.execute(
        "select n_distinct from pg_stats where schemaname = 'tickq'"
        " and tablename = 'jobs_live' and attname = 'id' and not inherited"
    ).fetchall()


def status_statistics(conn: psycopg.Connection) -> list[tuple[str, list[float]]]:
    return conn.execute(
        "select most_common_vals::text, most_common_freqs from pg_stats"
        " where schemaname = 'tickq' and tablename = 'jobs_live' and attname = 'status'"
        " and not inherited"
    ).fetchall()


@pytest.mark.parametrize("claim", ["plain", "fair", "limited"])
def test_a_backlog_after_an_empty_analyze_is_drained_through_the_id_index(
    migrated: psycopg.Connection, claim: str
) -> None:
    # Given a live partition analyzed, vacuumed and truncated while empty
    conn = migrated
    for maintenance in (
        "analyze tickq.jobs_live",
        "vacuum tickq.jobs_live",
        "vacuum (full, analyze) tickq.jobs_live",
        "truncate tickq.jobs",
    ):
        conn.execute(maintenance)
    registry = Registry()
    registry.task("noop")(lambda job: None)
    if claim == "limited":  # the claim goes through tickq.claim_limited
        Limits(conn).set_type(type_limit("noop", max_running=1000))
    groups = 3 if claim == "fair" else 1  # mixed groups: tickq.claim_fair
    store = PostgresStore(conn)
    store.enqueue_many([registry.spec("noop", group=f"g{i % groups}") for i in range(BACKLOG)])
    before = live_sequential_scans(conn)

    # When a backlog then arrives and is drained ten jobs at a time
    with Runner(store, registry, batch_size=10, concurrency=1) as runner:
        assert runner.tick().succeeded == BACKLOG

    # Then no batch read the whole partition
    assert live_sequential_scans(conn) - before == 0, (
        f"{claim} drain scanned jobs_live; its id statistics: {id_statistics(conn)}"
    )


def test_migrate_gives_back_the_id_statistics_a_restore_lost(
    migrated: psycopg.Connection,
) -> None:
    # Given live jobs, and the partition's statistics gone (as after a dump and restore)
    conn = migrated
    store = PostgresStore(conn)
    store.enqueue_many([Registry().spec("noop") for _ in range(3)])
    conn.execute("delete from pg_statistic where starelid = 'tickq.jobs_live'::regclass")
    assert id_statistics(conn) == []

    # When the migrations run again (none is pending)
    assert migrate(conn) == []

    # Then the ids are said distinct again, the statuses all queued (as an ANALYZE of a
    # backlog says), and only the jobs that were there remain
    assert id_statistics(conn) == [(-1.0,)]
    assert status_statistics(conn) == [("{queued}", [1.0])]
    assert conn.execute("select type, count(*) from tickq.jobs group by type").fetchall() == [
        ("noop", 3)
    ]
    (options,) = conn.execute(
        "select attoptions from pg_attribute"
        " where attrelid = 'tickq.jobs_live'::regclass and attname = 'id'"
    ).fetchone()  # type: ignore[misc]
    assert options == ["n_distinct=-1"]


def test_a_later_analyze_with_jobs_keeps_the_ids_distinct(migrated: psycopg.Connection) -> None:
    # Given live jobs whose sample would say otherwise of any column of repeated values
    conn = migrated
    store = PostgresStore(conn)
    store.enqueue_many([Registry().spec("noop") for _ in range(50)])

    # When the partition is analyzed with them, then emptied and analyzed again
    conn.execute("analyze tickq.jobs_live")
    conn.execute("delete from tickq.jobs")
    conn.execute("analyze tickq.jobs_live")

    # Then its ids still count as distinct
    assert id_statistics(conn) == [(-1.0,)]
