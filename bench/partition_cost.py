"""Partitioned jobs (migration 0014) against the single table they replace, same engine code.

Two databases on one server: one migrated up to 0013 (tickq.jobs one heap), one migrated
fully (live jobs apart, finished ones by day). Both first hold `--history` finished jobs
(finished through real claims and acks, as a queue's history builds up); then, round after
round, each drains a fresh backlog of `--jobs` jobs through Runner.tick at batch 100 and
batch 10, the two databases taking turns and swapping who goes first, so drift favours
neither. Reported: median seconds per drain and the ratio partitioned / single table
(below 1: partitions faster), and the table's size and dead tuples after the rounds.

Then retention: `--prune` finished jobs older than a 7-day policy, pruned by dropping their
day partition, against the same rows pruned in batches of 1,000 (the rows in the default
partition, which retention deletes row by row), both on the partitioned schema.

    .venv/bin/python -m bench.partition_cost [--jobs 5000] [--history 100000] [--rounds 5]
        [--prune 1000000]

Uses TICKQ_DATABASE_URL (a superuser able to create databases) or a throwaway local server.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from queue_core import PostgresStore, Runner, partitions
from queue_core.migrate import migrate
from queue_core.retention import Retention, policy

from .server import env_or_local_server, fresh_database
from .storage import LEAVES
from .systems import raw_side, tickq_side

BATCHES = (100, 10)
LAST_SINGLE_TABLE = "0013"


def install_single_table(url: str) -> None:
    """Migrations up to 0013: tickq.jobs as one heap."""
    with psycopg.connect(url) as conn:
        migrate(conn, through=LAST_SINGLE_TABLE)


def install_partitioned(url: str) -> None:
    with psycopg.connect(url) as conn:
        migrate(conn)


def history(url: str, rows: int) -> None:
    """`rows` jobs enqueued, claimed and acked, 5000 per transaction; then vacuumed."""
    with psycopg.connect(url, autocommit=True) as conn:
        for first in range(0, rows, 100_000):
            conn.execute(
                "insert into tickq.jobs (type) select 'noop' from generate_series(1, %s)",
                (min(100_000, rows - first),),
            )
        while True:
            with conn.transaction():
                ids = [r[0] for r in conn.execute(raw_side.CLAIM, {"limit": 5000})]
                conn.execute(raw_side.ACK, {"ids": ids})
            if not ids:
                break
        conn.execute("vacuum analyze tickq.jobs")


def drain(url: str, jobs: int, batch: int) -> float:
    with psycopg.connect(url, autocommit=True) as conn:
        for first in range(0, jobs, 100_000):
            conn.execute(
                "insert into tickq.jobs (type) select 'noop' from generate_series(1, %s)",
                (min(100_000, jobs - first),),
            )
        runner = Runner(PostgresStore(conn), tickq_side.registry, batch_size=batch, concurrency=1)
        started = time.perf_counter()
        report = runner.tick()
        seconds = time.perf_counter() - started
    assert report.succeeded == jobs, report
    return seconds


def table_state(url: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("select pg_stat_force_next_flush()")
        row = conn.execute(
            "select sum(pg_total_relation_size(t.relid))::bigint, sum(s.n_dead_tup)::bigint"
            f" from ({LEAVES}) t join pg_stat_user_tables s on s.relid = t.relid"
        ).fetchone()
    assert row is not None
    return {"total_bytes": row[0], "dead_tuples": row[1]}


def prune(admin_url: str, rows: int) -> dict[str, Any]:
    """Seconds to prune `rows` finished jobs a month old: a dropped day partition, and the
    same rows deleted in batches of 1,000 from the default partition."""
    now = datetime.now(UTC)
    old = now - timedelta(days=30)
    result: dict[str, Any] = {"rows": rows}
    for label, with_partition in (("partition_drop", True), ("batched_deletes", False)):
        with fresh_database(admin_url, f"prune_{label}") as url:
            install_partitioned(url)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(
                    "insert into tickq.jobs (type, status, finished_at)"
                    " select 'noop', 'succeeded', %s - g * interval '10 microseconds'"
                    " from generate_series(1, %s) g",
                    (old, rows),
                )
                if with_partition:
                    partitions.ensure(conn, days_ahead=0, now=old)
                conn.execute("vacuum analyze tickq.jobs")
                retention = Retention(conn)
                retention.set(policy(max_age="7d", statuses=["succeeded", "cancelled", "dead"]))
                started = time.perf_counter()
                report = retention.prune(now=now)
                result[f"{label}_seconds"] = time.perf_counter() - started
                result[f"{label}_deleted"] = report.deleted
                result[f"{label}_partitions_dropped"] = len(report.partitions_dropped)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--history", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prune", type=int, default=1_000_000)
    args = parser.parse_args()
    result: dict[str, Any] = {"jobs": args.jobs, "history": args.history, "rounds": args.rounds}
    with env_or_local_server() as admin_url, ExitStack() as stack:
        urls = {
            "single_table": stack.enter_context(fresh_database(admin_url, "single")),
            "partitioned": stack.enter_context(fresh_database(admin_url, "partitioned")),
        }
        install_single_table(urls["single_table"])
        install_partitioned(urls["partitioned"])
        for url in urls.values():
            history(url, args.history)
        times: dict[str, list[float]] = {f"{n}_{b}": [] for n in urls for b in BATCHES}
        for round_ in range(args.rounds):
            order = list(urls.items()) if round_ % 2 else list(reversed(urls.items()))
            for batch in BATCHES:
                for name, url in order:
                    times[f"{name}_{batch}"].append(drain(url, args.jobs, batch))
        for batch in BATCHES:
            single = statistics.median(times[f"single_table_{batch}"])
            parted = statistics.median(times[f"partitioned_{batch}"])
            result[f"batch_{batch}"] = {
                "single_table_seconds": round(single, 4),
                "partitioned_seconds": round(parted, 4),
                "ratio_partitioned_over_single": round(parted / single, 3),
            }
        result["tables_after"] = {name: table_state(url) for name, url in urls.items()}
        if args.prune:
            result["prune"] = prune(admin_url, args.prune)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
