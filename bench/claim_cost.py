"""Claim cost with a backlog of runnable jobs beside none vs many finished jobs.

The finished jobs become finished through real updates (the claim CTE, then an ack by id
array, in batches, each its own transaction), never inserted pre-finished, and the table is
not vacuumed meanwhile (autovacuum off for it), so their dead tuples and dead index entries
are all still there when the claims are timed.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from typing import Any

import psycopg
from psycopg import sql

import queue_core
from queue_core import PostgresStore

from .server import fresh_database
from .systems import raw_side, tickq_side

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
    """Enqueue `rows` jobs, then claim and ack them all, CHURN_BATCH per transaction."""
    done = 0
    for first in range(0, rows, 100_000):
        conn.execute(
            "insert into tickq.jobs (type) select 'noop' from generate_series(1, %s)",
            (min(100_000, rows - first),),
        )
    while done < rows:
        with conn.transaction():
            ids = [r[0] for r in conn.execute(raw_side.CLAIM, {"limit": CHURN_BATCH})]
            conn.execute(raw_side.ACK, {"ids": ids})
        if not ids:
            break
        done += len(ids)


def _stats(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    row = conn.execute(
        # Summed over the partitions of tickq.jobs (migration 0014); the claim index is the
        # live partition's.
        "select sum(s.n_live_tup)::bigint, sum(s.n_dead_tup)::bigint,"
        " sum(pg_total_relation_size(s.relid))::bigint,"
        " pg_relation_size('tickq.jobs_claim_idx'),"
        " sum(coalesce(s.vacuum_count + s.autovacuum_count, 0))::bigint"
        " from pg_partition_tree('tickq.jobs') t"
        " join pg_stat_user_tables s on s.relid = t.relid where t.isleaf"
    ).fetchone()
    assert row is not None
    keys = ("live_tuples", "dead_tuples", "table_bytes", "claim_index_bytes", "vacuums")
    return dict(zip(keys, row, strict=True))


def measure(
    admin_url: str,
    *,
    finished_rows: int,
    runnable: int = 10_000,
    samples: int = 100,
    batch: int = 100,
) -> dict[str, Any]:
    """Median claim seconds with 0 and with `finished_rows` finished jobs, and their ratio.

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
            # Per partition (a partitioned table has no storage of its own): the live jobs'
            # and every finished day's.
            for schema, table in conn.execute(
                "select n.nspname, c.relname from pg_partition_tree('tickq.jobs') t"
                " join pg_class c on c.oid = t.relid"
                " join pg_namespace n on n.oid = c.relnamespace where t.isleaf"
            ).fetchall():
                conn.execute(
                    sql.SQL("alter table {} set (autovacuum_enabled = false)").format(
                        sql.Identifier(schema, table)
                    )
                )
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
            result[f"{label}_table"] = _stats(conn)
    result["ratio"] = result["churned_claim_seconds"] / result["empty_claim_seconds"]
    return result
