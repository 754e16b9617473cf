"""Retention: what pruning N finished jobs older than the policy costs, through the engine's
own pruner (`queue_core.policies.retention.Retention.prune`, the call MaintenanceFunction makes).

    .venv/bin/python -m bench.retention_cost [--jobs 1000000] [--kept 10000] [--live 10000]

One fresh database: the engine's partitions made first when it has a partition maker
(bench/storage.py says which names it looks for), then `--jobs` finished jobs inserted in
bulk through tickq.jobs with finish times spread evenly over the ten UTC days that ended
at yesterday's midnight (95 % succeeded, 4 % cancelled, 1 % dead), `--kept` jobs finished
in the last ten minutes and `--live` queued jobs beside them. The table is then vacuumed
and checkpointed, as days-old rows would be, and one catch-all policy (older than a day,
all three finished statuses) lets go of exactly the old jobs. Measured: the prune's wall
time (one process, a local socket: its statements' time), its batches, the WAL the server
wrote meanwhile, the table's state after it, and the VACUUM that cleans up after it.
Uses TICKQ_DATABASE_URL (a superuser able to create databases) or a throwaway local
server; with an external server, WAL from other databases counts too.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import psycopg

import queue_core
from queue_core.policies import retention
from queue_core.policies.retention import Retention

from . import storage
from .server import env_or_local_server, fresh_database
from .systems import tickq_side

POLICY_AGE = "1d"
STATUSES = ("succeeded", "cancelled", "dead")


class PruneMiscounted(AssertionError):
    """The prune did not remove exactly the old jobs: its timing would mean nothing."""


def _fill(conn: psycopg.Connection[Any], jobs: int, kept: int, live: int) -> dict[str, Any]:
    """The table before the prune; returns how it was made and how long it took."""
    row = conn.execute(
        "select date_trunc('day', now()) - interval '11 days',"
        " date_trunc('day', now()) - interval '1 day',"
        " now() - interval '10 minutes', now(), now() + interval '1 day'"
    ).fetchone()
    assert row is not None
    old_since, old_until, kept_since, now, tomorrow = row
    maker = storage.make_partitions(conn, old_since, tomorrow)
    started = time.perf_counter()
    storage.insert_finished(conn, jobs, old_since, old_until)
    inserted = time.perf_counter() - started
    if kept:
        storage.insert_finished(conn, kept, kept_since, now)
    for first in range(0, live, tickq_side.CHUNK):
        size = min(live - first, tickq_side.CHUNK)
        queue_core.enqueue_many(conn, [{"type": "noop"}] * size, using=tickq_side.registry)
    conn.execute("select pg_stat_force_next_flush()")  # the inserts counted before vacuum
    conn.execute("vacuum (analyze) tickq.jobs")
    conn.execute("checkpoint")
    return {
        "partition_maker": maker,
        "old_finished_between": [old_since.isoformat(), old_until.isoformat()],
        "insert_seconds": round(inserted, 2),
    }


def measure(admin_url: str, *, jobs: int, kept: int, live: int) -> dict[str, Any]:
    """Fill a fresh database, prune it through the engine, and report what that cost."""
    result: dict[str, Any] = {"jobs": jobs, "kept": kept, "live": live, "policy_age": POLICY_AGE}
    with (
        fresh_database(admin_url, "retention") as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        tickq_side.install(url)
        result.update(_fill(conn, jobs, kept, live))
        pruner = Retention(conn)
        pruner.set(retention.policy(max_age=POLICY_AGE, statuses=STATUSES))
        result["before"] = storage.tree_stats(conn)
        lsn = storage.wal_lsn(conn)
        started = time.perf_counter()
        report = pruner.prune()
        result["prune_seconds"] = time.perf_counter() - started
        result["prune_wal_bytes"] = storage.wal_bytes_since(conn, lsn)
        result["prune"] = report.as_dict()
        result["after"] = storage.tree_stats(conn)
        remaining = result["after"]["rows"]
        if report.deleted != jobs or remaining != kept + live:
            raise PruneMiscounted(
                f"pruned {report.deleted} of {jobs} old jobs and left {remaining} rows,"
                f" expected {kept + live}"
            )
        lsn = storage.wal_lsn(conn)
        started = time.perf_counter()
        conn.execute("vacuum tickq.jobs")
        result["vacuum_after_seconds"] = time.perf_counter() - started
        result["vacuum_after_wal_bytes"] = storage.wal_bytes_since(conn, lsn)
        result["after_vacuum"] = storage.tree_stats(conn)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retention_cost", description=__doc__)
    parser.add_argument("--jobs", type=int, default=1_000_000, help="old finished jobs to prune")
    parser.add_argument("--kept", type=int, default=10_000, help="recent finished jobs kept")
    parser.add_argument("--live", type=int, default=10_000, help="queued jobs beside them")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be a positive integer")
    if args.kept < 0 or args.live < 0:
        parser.error("--kept and --live must not be negative")
    with env_or_local_server() as admin_url:
        result = measure(admin_url, jobs=args.jobs, kept=args.kept, live=args.live)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
