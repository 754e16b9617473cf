"""Claim cost with a backlog of runnable jobs beside none vs many finished jobs.

The finished jobs become finished as after a burst: inserted queued, then claimed and
finished by the engine's own store (`finish_and_claim`, the statement a draining worker
runs, CHURN_BATCH jobs a batch, each its own transaction), never inserted pre-finished, and
not vacuumed meanwhile (autovacuum off for every storage table of tickq.jobs), so their
dead tuples and dead index entries are all still there when the claims are timed. Then
both databases are vacuumed and timed again: what the finished rows cost once vacuum has
caught up.

    .venv/bin/python -m bench.claim_cost [--finished-rows 1000000] [--samples 100]

Only the store and SQL valid on a single table and on a partitioned one are used, so the
same command measures either storage. `python -m bench` runs it too, with its sizes.
Uses TICKQ_DATABASE_URL (a superuser able to create databases) or a throwaway local server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from typing import Any

import psycopg

import queue_core
from queue_core import PostgresStore
from queue_core.model import transitions

from . import storage
from .server import env_or_local_server, fresh_database
from .systems import tickq_side

CHURN_BATCH = 5000


def _timed_claims(
    conns: list[psycopg.Connection[Any]], samples: int, batch: int
) -> list[list[float]]:
    """Seconds per claim of `batch` jobs in each database, the databases taking turns.

    Each claim is rolled back, so all see one backlog. Alternating sample by sample (and
    swapping who goes first) puts both databases under the same machine load, so the ratio
    is about the finished rows, not about what the shared machine did in between.
    """
    stores = [PostgresStore(conn) for conn in conns]
    out: list[list[float]] = [[] for _ in conns]
    for sample in range(samples):
        order = range(len(conns)) if sample % 2 else reversed(range(len(conns)))
        for i in order:
            with conns[i].transaction(force_rollback=True):
                started = time.perf_counter()
                jobs = stores[i].claim(limit=batch)
                out[i].append(time.perf_counter() - started)
                assert len(jobs) == batch
    return out


def _churn(conn: psycopg.Connection[Any], rows: int) -> None:
    """Enqueue `rows` jobs, then claim and finish them all through the store, CHURN_BATCH
    per statement: each statement finishes the batch before and claims the next."""
    for first in range(0, rows, 100_000):
        conn.execute(
            "insert into tickq.jobs (type) select 'noop' from generate_series(1, %s)",
            (min(100_000, rows - first),),
        )
    store = PostgresStore(conn)
    jobs = store.claim(limit=CHURN_BATCH)
    while jobs:
        _, jobs = store.finish_and_claim(
            [transitions.succeeded(job, None) for job in jobs], limit=CHURN_BATCH
        )


def measure(
    admin_url: str,
    *,
    finished_rows: int,
    runnable: int = 10_000,
    samples: int = 100,
    batch: int = 100,
) -> dict[str, Any]:
    """Median claim seconds with 0 and with `finished_rows` finished jobs, and their ratio,
    unvacuumed (`ratio`) and after a VACUUM of both (`vacuumed_ratio`).

    Both databases are built first (the churn's write-back flushed by a checkpoint), then
    timed together.
    """
    result: dict[str, Any] = {"finished_rows": finished_rows, "runnable": runnable, "batch": batch}
    labels = (("empty", 0), ("churned", finished_rows))
    with contextlib.ExitStack() as stack:
        conns = []
        for label, churned in labels:
            url = stack.enter_context(fresh_database(admin_url, f"claim_{label}"))
            tickq_side.install(url)
            conn = stack.enter_context(psycopg.connect(url, autocommit=True))
            storage.make_partitions(conn, *_churn_window(conn))
            storage.set_storage_options(conn, "autovacuum_enabled = false")
            started = time.perf_counter()
            _churn(conn, churned)
            result[f"{label}_churn_seconds"] = time.perf_counter() - started
            for first in range(0, runnable, tickq_side.CHUNK):
                size = min(runnable - first, tickq_side.CHUNK)
                queue_core.enqueue_many(conn, [{"type": "noop"}] * size, using=tickq_side.registry)
            conns.append(conn)
        conns[0].execute("checkpoint")
        for conn in conns:
            conn.execute("select pg_stat_force_next_flush()")
        claims = _timed_claims(conns, samples, batch)
        for (label, _), conn, seconds in zip(labels, conns, claims, strict=True):
            result[f"{label}_claim_seconds"] = statistics.median(seconds)
            result[f"{label}_first_claim_seconds"] = seconds[0]
            result[f"{label}_table"] = storage.tree_stats(conn)
        for conn in conns:
            conn.execute("vacuum tickq.jobs")
        claims = _timed_claims(conns, samples, batch)
        for (label, _), conn, seconds in zip(labels, conns, claims, strict=True):
            result[f"{label}_vacuumed_claim_seconds"] = statistics.median(seconds)
            result[f"{label}_vacuumed_table"] = storage.tree_stats(conn)
    result["partition_maker"] = storage.partition_maker_name()
    result["ratio"] = result["churned_claim_seconds"] / result["empty_claim_seconds"]
    result["vacuumed_ratio"] = (
        result["churned_vacuumed_claim_seconds"] / result["empty_vacuumed_claim_seconds"]
    )
    return result


def _churn_window(conn: psycopg.Connection[Any]) -> tuple[Any, Any]:
    """The finish times the churn will write: today, give or take a day around midnight."""
    row = conn.execute("select now() - interval '1 day', now() + interval '1 day'").fetchone()
    assert row is not None
    return row[0], row[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.claim_cost", description=__doc__)
    parser.add_argument("--finished-rows", type=int, default=1_000_000)
    parser.add_argument("--runnable", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args(argv)
    for name in ("finished_rows", "runnable", "samples", "batch"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer")
    if args.runnable < args.batch:
        parser.error("--runnable must be at least --batch (every timed claim takes a full batch)")
    with env_or_local_server() as admin_url:
        result = measure(
            admin_url,
            finished_rows=args.finished_rows,
            runnable=args.runnable,
            samples=args.samples,
            batch=args.batch,
        )
    print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
