"""Table health under churn: dead tuples, size and throughput of tickq.jobs after many jobs
went through enqueue → claim → finish, under candidate storage settings.

`python -m bench.table_health [--jobs N] [--settings NAME ...]`: each candidate gets a fresh
database on one durable server, the same churn by tickq's own store (enqueue_many, claim,
finish in batches of 1000), autovacuum as configured for the table (server defaults
otherwise, so its naptime is the stock one minute). Finished jobs stay, as they do until
retention prunes. "as migrated" keeps the storage settings the migrations chose; the
others start from stock settings and apply their own to every storage table of tickq.jobs
(a partitioned table's existing partitions; one table today). Sizes and tuples are summed
over the whole partition tree (bench/storage.py), so one command measures either storage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from queue_core import PostgresStore
from queue_core.model import transitions

from . import storage
from .server import benchmark_server, fresh_database
from .systems import tickq_side

BATCH = 1000
AS_MIGRATED = "as migrated"
STOCK = "stock"
STUDIED_OPTIONS = (
    "fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,"
    " autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold,"
    " autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_delay,"
    " toast.autovacuum_vacuum_scale_factor, toast.autovacuum_vacuum_threshold,"
    " toast.autovacuum_vacuum_insert_scale_factor, toast.autovacuum_vacuum_insert_threshold,"
    " toast.autovacuum_vacuum_cost_delay"
)
# Storage options per candidate (constant text, never user input); None applies nothing.
CANDIDATES: dict[str, str | None] = {
    AS_MIGRATED: None,
    STOCK: None,
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


def churn(url: str, jobs: int, settings: str | None) -> dict[str, Any]:
    """Push `jobs` jobs through; rates per tenth of the run, and the table's state after."""
    specs = [tickq_side.registry.spec("noop") for _ in range(BATCH)]
    with psycopg.connect(url, autocommit=True) as conn:
        if settings:
            storage.set_storage_options(conn, settings)
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
        stats = storage.tree_stats(conn)
    return {"jobs": jobs, "jobs_per_second_by_tenth": [round(r) for r in rates], **stats}


def prepare(url: str, candidate: str) -> str | None:
    """Migrate, make the engine's partitions if it has a maker, and reset the studied
    options unless the candidate keeps the migrations' choice; returns the maker's name."""
    tickq_side.install(url)
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("select now() - interval '1 day', now() + interval '1 day'").fetchone()
        assert row is not None
        maker = storage.make_partitions(conn, row[0], row[1])
        if candidate != AS_MIGRATED:
            storage.reset_storage_options(conn, STUDIED_OPTIONS)
    return maker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.table_health", description=__doc__)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument(
        "--settings",
        action="append",
        choices=list(CANDIDATES),
        help="a candidate to run (repeatable; default: all of them)",
    )
    parser.add_argument("--database-url")
    parser.add_argument("--out", type=Path, default=Path("bench/results/table_health.json"))
    args = parser.parse_args(argv)
    if args.jobs < BATCH:
        parser.error(f"--jobs must be at least {BATCH}")
    results: dict[str, Any] = {}
    with benchmark_server(args.database_url) as admin_url:
        for name in args.settings or list(CANDIDATES):
            with fresh_database(admin_url, "health") as url:
                maker = prepare(url, name)
                started = time.perf_counter()
                results[name] = churn(url, args.jobs, CANDIDATES[name])
                results[name]["seconds"] = round(time.perf_counter() - started, 1)
                results[name]["partition_maker"] = maker
                print(name, json.dumps(results[name]), file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
