"""Migration 0014 (tickq.jobs into partitions) on a busy database: how long it takes, and
how long a worker draining the queue meanwhile waits.

A database migrated up to 0013 gets `--finished` finished jobs (spread over 30 days) and
`--live` queued ones; a worker thread then claims and finishes batches of 10 on its own
connection, timing each call, while the main thread runs `migrate`: staged, the finished
jobs are copied in batches while the worker runs, then 0014 and 0014b swap the tables in
one transaction (`--offline` applies 0014 alone, as a rewrite inside its transaction).
Reported: the migration's seconds, split into the copy and what follows it (indexes, catching
up, the swap), the worker's longest call (the time it waited for the swap's lock) and its
errors (none expected: its statements find the new table under the old name), and that
every job is still there afterwards.

    .venv/bin/python -m bench.migration_cost [--finished 1000000] [--live 10000] [--offline]

Uses TICKQ_DATABASE_URL (a superuser able to create databases) or a throwaway local server.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

import psycopg

from queue_core import PostgresStore, transitions
from queue_core.migrate import available, migrate
from queue_core.validation import job_spec

from .partition_cost import install_single_table
from .server import env_or_local_server, fresh_database


class Worker(threading.Thread):
    """Claims and finishes batches of 10 and enqueues as many new jobs, so the backlog stays
    as it was, until stopped; times every round."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True, name="migration-worker")
        self.url = url
        self.stop_event = threading.Event()
        self.calls: list[tuple[float, float]] = []  # (started, seconds)
        self.errors: list[str] = []
        self.finished = 0
        self.enqueued = 0

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            store = PostgresStore(conn)
            while not self.stop_event.is_set():
                started = time.perf_counter()
                try:
                    jobs = store.claim(limit=10)
                    store.finish([transitions.succeeded(j, None) for j in jobs])
                    self.finished += len(jobs)
                    store.enqueue_many([job_spec("noop") for _ in jobs])
                    self.enqueued += len(jobs)
                except Exception as exc:  # recorded: the report says what went wrong
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                self.calls.append((started, time.perf_counter() - started))


def measure(admin_url: str, finished: int, live: int, offline: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"finished": finished, "live": live, "staged": not offline}
    with fresh_database(admin_url, "migration") as url:
        install_single_table(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "insert into tickq.jobs (type, status, finished_at)"
                " select 'noop', 'succeeded', now() - (g %% 30) * interval '1 day'"
                " - g * interval '1 microsecond' from generate_series(1, %s) g",
                (finished,),
            )
            conn.execute(
                "insert into tickq.jobs (type) select 'noop' from generate_series(1, %s)",
                (live,),
            )
            conn.execute("vacuum analyze tickq.jobs")
        worker = Worker(url)
        worker.start()
        time.sleep(1.0)  # the worker's statements are prepared and running
        copied: list[float] = []
        with psycopg.connect(url) as conn:
            started = time.perf_counter()
            if offline:
                result["applied"] = apply_unstaged(conn)
            else:
                result["applied"] = migrate(
                    conn, progress=lambda n: copied.append(time.perf_counter())
                )
            ended = time.perf_counter()
        time.sleep(1.0)
        worker.stop_event.set()
        worker.join()
        result["migration_seconds"] = round(ended - started, 3)
        if copied:
            result["copy_seconds"] = round(copied[-1] - started, 3)
            result["after_copy_seconds"] = round(ended - copied[-1], 3)
        during = [s for t, s in worker.calls if t + s >= started and t <= ended]
        result["worker_longest_call_seconds"] = round(max(s for _, s in worker.calls), 3)
        result["worker_calls_during_migration"] = len(during)
        result["worker_jobs_finished"] = worker.finished
        result["worker_jobs_enqueued"] = worker.enqueued
        result["worker_errors"] = worker.errors[:5]
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "select count(*), count(*) filter (where status = 'succeeded'),"
                " (select relkind from pg_class where oid = 'tickq.jobs'::regclass)"
                " from tickq.jobs"
            ).fetchone()
        assert row is not None
        result["jobs_after"] = row[0]
        result["succeeded_after"] = row[1]
        result["partitioned_after"] = row[2] == "p"
    return result


def apply_unstaged(conn: psycopg.Connection[Any]) -> list[str]:
    """0014 and what follows, as one transaction that copies every row itself."""
    versions = [m for m in available() if m.version >= "0014"]
    with conn.transaction():
        for migration in versions:
            conn.execute(migration.sql.encode())
            conn.execute("insert into tickq.schema_migrations values (%s)", (migration.version,))
    return [m.version for m in versions]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--live", type=int, default=10_000)
    parser.add_argument("--offline", action="store_true", help="0014 as one rewrite")
    args = parser.parse_args()
    with env_or_local_server() as admin_url:
        result = measure(admin_url, args.finished, args.live, args.offline)
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
