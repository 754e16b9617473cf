"""Table health under churn: dead tuples, size and throughput of tickq.jobs after many jobs
went through enqueue → claim → finish, under candidate storage settings.

`python -m bench.table_health [--jobs N]`: each candidate gets a fresh database on one
durable server, the same churn by tickq's own store (enqueue_many, claim, finish in batches
of 1000), autovacuum as configured for the table (server defaults otherwise, so its
naptime is the stock one minute). Finished jobs stay, as they do until retention prunes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from queue_core import PostgresStore, transitions

from .server import benchmark_server, fresh_database
from .systems import tickq_side

BATCH = 1000
CANDIDATES: dict[str, str | None] = {
    "stock": None,
    "autovacuum 1%": (
        "autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,"
        " autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02,"
        " autovacuum_vacuum_cost_delay = 0"
    ),
    "autovacuum 1% + fillfactor 80": (
        "fillfactor = 80, autovacuum_vacuum_scale_factor = 0.01,"
        " autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0.01,"
        " autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0"
    ),
}


def churn(url: str, jobs: int, storage: str | None) -> dict[str, Any]:
    """Push `jobs` jobs through; rates per tenth of the run, and the table's state after."""
    specs = [tickq_side.registry.spec("noop") for _ in range(BATCH)]
    with psycopg.connect(url, autocommit=True) as conn:
        if storage:
            # Constant text from CANDIDATES above, never user input.
            # On the live jobs' partition, where the churn is (migration 0014).
            conn.execute(f"alter table tickq.jobs_live set ({storage})")
        store = PostgresStore(conn)
        rates: list[float] = []
        window, window_start, done = max(jobs // 10, BATCH), time.perf_counter(), 0
        while done < jobs:
            store.enqueue_many(specs)
            claimed = store.claim(limit=BATCH)
            store.finish([transitions.succeeded(job, None) for job in claimed])
            done += len(claimed)
            if done % window < BATCH:
                now = time.perf_counter()
                rates.append(window / (now - window_start))
                window_start = now
        conn.execute("select pg_stat_force_next_flush()")
        row = conn.execute(
            # Summed over the partitions of tickq.jobs (migration 0014).
            "select sum(s.n_live_tup)::bigint, sum(s.n_dead_tup)::bigint,"
            " sum(s.n_tup_upd)::bigint, sum(s.n_tup_hot_upd)::bigint,"
            " sum(s.autovacuum_count)::bigint, sum(pg_relation_size(s.relid))::bigint,"
            " sum(pg_indexes_size(s.relid))::bigint"
            " from pg_partition_tree('tickq.jobs') t"
            " join pg_stat_user_tables s on s.relid = t.relid where t.isleaf"
        ).fetchone()
    assert row is not None
    names = ("live", "dead", "updates", "hot_updates", "autovacuums", "heap_bytes", "index_bytes")
    return {
        "jobs": jobs,
        "jobs_per_second_by_tenth": [round(r) for r in rates],
        **dict(zip(names, row, strict=True)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.table_health", description=__doc__)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--database-url")
    parser.add_argument("--out", type=Path, default=Path("bench/results/table_health.json"))
    args = parser.parse_args(argv)
    if args.jobs < BATCH:
        parser.error(f"--jobs must be at least {BATCH}")
    results: dict[str, Any] = {}
    with benchmark_server(args.database_url) as admin_url:
        for name, storage in CANDIDATES.items():
            with fresh_database(admin_url, "health") as url:
                tickq_side.install(url)
                # Start from stock settings whatever migration 0006 chose, then apply each.
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute(
                        "alter table tickq.jobs_live reset (fillfactor,"
                        " autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,"
                        " autovacuum_vacuum_insert_scale_factor,"
                        " autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_delay)"
                    )
                started = time.perf_counter()
                results[name] = churn(url, args.jobs, storage)
                results[name]["seconds"] = round(time.perf_counter() - started, 1)
                print(name, json.dumps(results[name]), file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
