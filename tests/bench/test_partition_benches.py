"""The partition benchmarks run at tiny sizes and measure what they say: migration 0014
on a database at 0013 while a worker drains it (the worker never fails, no job is lost),
and the single table against the partitioned one with the same engine code."""

from __future__ import annotations

import psycopg
import pytest


@pytest.mark.parametrize("offline", [False, True])
def test_migration_0014_under_a_draining_worker_loses_nothing(
    pg_admin_url: str, offline: bool
) -> None:
    from bench.migration_cost import measure

    result = measure(pg_admin_url, finished=3000, live=3000, offline=offline)

    assert result["applied"][0].startswith("0014")
    assert result["worker_errors"] == []
    assert result["partitioned_after"]
    assert result["jobs_after"] == 6000 + result["worker_jobs_enqueued"]
    assert result["succeeded_after"] == 3000 + result["worker_jobs_finished"]
    assert ("copy_seconds" in result) is not offline


def test_partition_cost_drains_both_shapes_and_prunes_both_ways(pg_admin_url: str) -> None:
    from bench import partition_cost
    from bench.server import fresh_database

    with (
        fresh_database(pg_admin_url, "single") as single,
        fresh_database(pg_admin_url, "parted") as parted,
    ):
        partition_cost.install_single_table(single)
        partition_cost.install_partitioned(parted)
        for url in (single, parted):
            partition_cost.history(url, 300)
            assert partition_cost.drain(url, 200, 10) > 0
        kinds = {url: _relkind(url) for url in (single, parted)}
    assert kinds == {single: "r", parted: "p"}
    pruned = partition_cost.prune(pg_admin_url, 500)
    assert pruned["partition_drop_deleted"] == pruned["batched_deletes_deleted"] == 500
    assert pruned["partition_drop_partitions_dropped"] == 1
    assert pruned["batched_deletes_partitions_dropped"] == 0


def _relkind(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "select relkind from pg_class where oid = 'tickq.jobs'::regclass"
        ).fetchone()
    assert row is not None
    return str(row[0])
