"""The storage benchmarks (claim cost, retention, table health) run at tiny sizes and
measure what they say, and their shared SQL reads a partitioned tickq.jobs as well as
today's single table, so the same scripts measure the storage before and after."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import psycopg
import pytest
from psycopg import sql

from bench import storage

DAY0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_claim_cost_times_claims_beside_churned_rows_then_vacuumed(pg_admin_url: str) -> None:
    from bench.claim_cost import measure

    # Given 2,000 jobs churned through the store beside a backlog of 200
    result = measure(pg_admin_url, finished_rows=2000, runnable=200, samples=4, batch=50)

    # Then both sides were timed, unvacuumed and vacuumed, and the churned side holds the
    # finished jobs with their dead versions (claim and finish) still unvacuumed
    for key in ("ratio", "vacuumed_ratio"):
        assert result[key] > 0
    churned, vacuumed = result["churned_table"], result["churned_vacuumed_table"]
    assert churned["rows"] == 2200 and result["empty_table"]["rows"] == 200
    assert churned["dead_tuples"] >= 2 * 2000 and churned["vacuums"] == 0
    assert vacuumed["dead_tuples"] < churned["dead_tuples"] and vacuumed["vacuums"] >= 1
    assert result["partition_maker"] == storage.partition_maker_name()


def test_retention_cost_prunes_exactly_the_old_jobs(pg_admin_url: str) -> None:
    from bench.retention_cost import measure

    # Given 3,000 old finished jobs beside 100 recent ones and 100 queued ones
    result = measure(pg_admin_url, jobs=3000, kept=100, live=100)

    # Then the engine's pruner removed the old ones and nothing else, and its cost is reported
    assert result["before"]["rows"] == 3200 and result["after"]["rows"] == 200
    assert result["prune"]["deleted"] == 3000 and result["prune"]["complete"]
    assert result["prune"]["by_status"] == {"succeeded": 2850, "cancelled": 120, "dead": 30}
    assert result["prune_seconds"] > 0 and result["prune_wal_bytes"] > 0
    assert result["after_vacuum"]["rows"] == 200


def test_table_health_reports_the_tree_after_the_churn(pg_admin_url: str, tmp_path: Path) -> None:
    from bench.table_health import AS_MIGRATED, main

    # Given 2,000 jobs churned with the migrations' storage settings
    out = tmp_path / "health.json"
    args = ["--jobs", "2000", "--settings", AS_MIGRATED, "--database-url", pg_admin_url]
    assert main([*args, "--out", str(out)]) == 0

    # Then the finished jobs and their dead versions are counted over the storage tables
    health = json.loads(out.read_text())[AS_MIGRATED]
    assert health["rows"] == 2000 and health["storage_tables"] >= 1
    # (a claim is an update; a finish is one too, or a move between partitions)
    assert health["updated"] + health["deleted"] >= 2 * 2000
    assert health["total_bytes"] >= health["heap_bytes"] + health["index_bytes"] > 0
    assert health["schema_bytes"] >= health["total_bytes"]


def _partitioned_jobs(conn: psycopg.Connection[Any]) -> None:
    """A partitioned tickq.jobs with the columns the bulk insert writes: live jobs in one
    partition, finished ones in a partition per day of finished_at."""
    conn.execute("create schema tickq")
    conn.execute(
        "create table tickq.jobs (id uuid not null default gen_random_uuid(),"
        " queue text not null default 'default', type text not null,"
        " status text not null default 'queued', attempts int not null default 0,"
        " max_attempts int not null default 3, error text,"
        " errors jsonb not null default '[]', run_after timestamptz not null default now(),"
        " created_at timestamptz not null default now(),"
        " updated_at timestamptz not null default now(), started_at timestamptz,"
        " finished_at timestamptz) partition by list (status)"
    )
    conn.execute(
        "create table tickq.jobs_live partition of tickq.jobs"
        " for values in ('waiting', 'queued', 'running', 'retrying')"
    )
    conn.execute(
        "create table tickq.jobs_finished partition of tickq.jobs"
        " for values in ('succeeded', 'dead', 'cancelled') partition by range (finished_at)"
    )
    for day in range(10):
        start = DAY0 + timedelta(days=day)
        conn.execute(
            sql.SQL(
                "create table {} partition of tickq.jobs_finished for values from ({}) to ({})"
            ).format(
                sql.Identifier("tickq", f"jobs_finished_{day}"),
                sql.Literal(start),
                sql.Literal(start + timedelta(days=1)),
            )
        )
    conn.execute("create index jobs_finished_at_idx on tickq.jobs (finished_at)")


def test_the_shared_sql_reads_a_partitioned_jobs_table(fresh_database_url: str) -> None:
    with psycopg.connect(fresh_database_url, autocommit=True) as conn:
        # Given tickq.jobs partitioned into live jobs and ten day partitions of finished ones
        _partitioned_jobs(conn)

        # When 1,000 finished jobs are bulk-inserted over the ten days, one queued job beside
        storage.insert_finished(conn, 1000, DAY0, DAY0 + timedelta(days=10))
        conn.execute("insert into tickq.jobs (type) values ('noop')")
        changed = storage.set_storage_options(conn, "autovacuum_enabled = false")
        stats = storage.tree_stats(conn)

        # Then each day partition got its hundred jobs, and the figures sum every partition
        per_day = conn.execute(
            "select tableoid::regclass::text, count(*) from tickq.jobs group by 1 order by 1"
        ).fetchall()
        assert per_day == [(f"tickq.jobs_finished_{d}", 100) for d in range(10)] + [
            ("tickq.jobs_live", 1)
        ]
        assert changed == stats["storage_tables"] == 11
        assert stats["rows"] == 1001
        row = conn.execute(
            "select sum(pg_total_relation_size(relid)) from pg_partition_tree('tickq.jobs')"
        ).fetchone()
        assert row is not None and stats["total_bytes"] == row[0] > 0
        assert list(stats["index_bytes_by_index"]) == ["tickq.jobs_finished_at_idx"]
        assert stats["index_bytes_by_index"]["tickq.jobs_finished_at_idx"] == stats["index_bytes"]
        options = conn.execute(
            "select count(*) from pg_class where relnamespace = 'tickq'::regnamespace"
            " and relkind = 'r' and 'autovacuum_enabled=false' = any(reloptions)"
        ).fetchone()
        assert options == (11,)


def test_a_partition_maker_is_found_and_called_with_the_arguments_it_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = ModuleType("engine")
    monkeypatch.setattr(storage, "PARTITION_MAKER_MODULES", (engine,))
    conn = cast(psycopg.Connection[Any], object())
    calls: list[tuple[Any, datetime]] = []

    def ensure_partitions(conn: Any, *, until: datetime) -> None:
        calls.append((conn, until))

    # Given an engine without a partition maker (a single table), nothing is called
    assert storage.make_partitions(conn, DAY0, DAY0 + timedelta(days=1)) is None

    # Given an engine with one, it is called with the connection and the bound it names
    monkeypatch.setattr(engine, "ensure_partitions", ensure_partitions, raising=False)
    name = storage.make_partitions(conn, DAY0, DAY0 + timedelta(days=1))
    assert name == storage.partition_maker_name() == "engine.ensure_partitions"
    assert calls == [(conn, DAY0 + timedelta(days=1))]
