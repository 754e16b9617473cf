"""Retention on partitions: a day of finished jobs dropped whole, against the same rows deleted.

`--prune` finished jobs older than a 7-day policy, pruned by dropping their day partition,
against the same rows pruned in batches of 1,000 (the rows in the default partition, which
retention deletes row by row). (This module also compared the partitioned table with the
single one it replaced, on databases migrated up to 0013; no released database has that
layout, and its figures stay in docs/benchmarks.md.)

    .venv/bin/python -m bench.partition_cost [--prune 1000000]

Uses TICKQ_DATABASE_URL (a superuser able to create databases) or a throwaway local server.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from queue_core.migrate import migrate
from queue_core.policies import partitions
from queue_core.policies.retention import Retention, policy

from .server import env_or_local_server, fresh_database


def prune(admin_url: str, rows: int) -> dict[str, Any]:
    """Seconds to prune `rows` finished jobs a month old: a dropped day partition, and the
    same rows deleted in batches of 1,000 from the default partition."""
    now = datetime.now(UTC)
    old = now - timedelta(days=30)
    result: dict[str, Any] = {"rows": rows}
    for label, with_partition in (("partition_drop", True), ("batched_deletes", False)):
        with fresh_database(admin_url, f"prune_{label}") as url:
            with psycopg.connect(url) as conn:
                migrate(conn)
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
    parser.add_argument("--prune", type=int, default=1_000_000)
    args = parser.parse_args()
    with env_or_local_server() as admin_url:
        result = {"prune": prune(admin_url, args.prune)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
