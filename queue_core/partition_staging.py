"""Migration 0014 on a live database: the finished jobs move before it, not inside it.

0014 turns tickq.jobs into partitions. Done in one transaction it copies every finished job
while holding the table's lock (seconds per million jobs, with the queue stopped). Staged,
the finished jobs are copied into tickq.jobs_done in batches of short transactions while
the queue runs, every change meanwhile is noted by id and caught up, and 0014 itself only
attaches that table, catches up the last notes and moves the live jobs (the statements are
in migrations/staged/0014_partitioned_jobs.sql, which says how the copy stays exact).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib import resources
from typing import Any

import psycopg

from .queries import parse

__all__ = ["BATCH_ROWS", "Progress", "locking", "needed", "stage"]

VERSION = "0014_partitioned_jobs"
BATCH_ROWS = 10_000
# Catching up runs until a round finds at most this many noted jobs, which the swap then
# catches up under its lock; a queue that changes faster than a round gives up after
# MAX_CATCH_UP_ROUNDS and leaves the rest to the swap.
CATCH_UP_ENOUGH = 1_000
MAX_CATCH_UP_ROUNDS = 10
# Making the triggers waits for writers at work and holds new ones back meanwhile: a short
# wait, retried, as tickq.jobs_partitions_ensure does for its partitions.
LOCK_TIMEOUT = "200ms"
LOCK_ATTEMPTS = 20
_FIRST_ID = "00000000-0000-0000-0000-000000000000"

Progress = Callable[[int], None]
"""Told the number of finished jobs copied so far, after each batch."""

_STATEMENTS = parse(
    (resources.files("queue_core") / "migrations" / "staged" / f"{VERSION}.sql").read_text(
        encoding="utf-8"
    ),
    f"migrations/staged/{VERSION}.sql",
)


def needed(conn: psycopg.Connection[Any]) -> bool:
    """Whether tickq.jobs is still the one table 0014 partitions."""
    with conn.transaction():
        row = conn.execute(
            "select relkind from pg_class where oid = to_regclass('tickq.jobs')"
        ).fetchone()
    return row is not None and row[0] == "r"


def stage(
    conn: psycopg.Connection[Any],
    *,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
) -> int:
    """Copy the finished jobs into tickq.jobs_done and catch up the changes made meanwhile;
    returns how many jobs were copied. Anything a stopped attempt left is discarded first,
    and anything this one made is discarded if it fails."""
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
    _unstage(conn)
    try:
        _locking(conn, _STATEMENTS["stage"])
        copied = _copy(conn, batch_rows, progress)
        with conn.transaction():
            conn.execute(_STATEMENTS["index"].encode())
        for _ in range(MAX_CATCH_UP_ROUNDS):
            with conn.transaction():
                row = conn.execute(_STATEMENTS["catch_up"]).fetchone()
            if row is None or row[0] <= CATCH_UP_ENOUGH:
                break
    except BaseException:
        if not conn.closed:
            _unstage(conn)
        raise
    return copied


def _copy(conn: psycopg.Connection[Any], batch_rows: int, progress: Progress | None) -> int:
    after, copied = _FIRST_ID, 0
    while True:
        with conn.transaction():
            row = conn.execute(_STATEMENTS["copy"], {"after": after, "rows": batch_rows}).fetchone()
        assert row is not None  # an aggregate always answers
        last, n = row
        copied += n
        if progress is not None and n:
            progress(copied)
        if n < batch_rows:
            return copied
        after = last


def _unstage(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        row = conn.execute("select to_regclass('tickq.jobs_0014_changed') is not null").fetchone()
    if row and row[0] and needed(conn):
        _locking(conn, _STATEMENTS["unstage"])


def _locking(conn: psycopg.Connection[Any], sql: str) -> None:
    locking(conn, lambda: conn.execute(sql.encode()), LOCK_TIMEOUT, LOCK_ATTEMPTS, 0.05)


def locking(
    conn: psycopg.Connection[Any],
    work: Callable[[], object],
    timeout: str,
    attempts: int,
    pause: float,
) -> None:
    """Run `work` in one transaction that waits at most `timeout` for each lock, and again
    (up to `attempts` times, pausing `pause` seconds more each time) when it waited longer or
    deadlocked: a schema change never holds the queue behind its lock request for long."""
    for attempt in range(1, attempts + 1):
        try:
            with conn.transaction():
                conn.execute("select set_config('lock_timeout', %s, true)", (timeout,))
                work()
            return
        except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected):
            if attempt == attempts:
                raise
            time.sleep(pause * attempt)
