"""Versioned SQL migrations shipped inside the package, applied once each, in order."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

from . import partition_staging, partitions

# Any stable 64-bit number; it serialises concurrent migrators across the whole cluster.
_LOCK_KEY = 0x7469636B71  # "tickq"
# A migration with a staging step moves its rows first, in short transactions; its own
# transaction then waits at most this long for each lock, retried, so a long reader ahead
# of it does not hold the whole queue back behind its lock request.
_STAGED = {partition_staging.VERSION: partition_staging}
_SWAP_LOCK_TIMEOUT = "1s"
_SWAP_ATTEMPTS = 10


@dataclass(frozen=True, slots=True)
class Migration:
    version: str
    sql: str


def available() -> list[Migration]:
    folder = resources.files("queue_core") / "migrations"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [Migration(f.name.removesuffix(".sql"), f.read_text(encoding="utf-8")) for f in files]


def migrate(
    conn: psycopg.Connection[Any],
    *,
    batch_rows: int = partition_staging.BATCH_ROWS,
    progress: partition_staging.Progress | None = None,
    through: str | None = None,
) -> list[str]:
    """Apply pending migrations; returns the versions applied.

    Pending migrations apply in one transaction. On a database that has jobs already, one
    with a staging step (0014, which partitions tickq.jobs) starts a transaction of its own:
    those before it commit first, its rows move in batches of `batch_rows` while the queue
    runs (`progress` hears how many so far), then it applies with the ones after it.

    `through` stops after the migrations whose version starts with it ("0013"): a database
    as an older release left it, for upgrade tests and benchmarks.

    Safe to run from several processes at once: an advisory lock is taken before anything
    is read, so a second migrator waits, then finds the work done.
    """
    applied: list[str] = []
    with conn.transaction():
        conn.execute("select pg_advisory_lock(%s)", (_LOCK_KEY,))
    try:
        # A fresh database has no rows to move: everything applies in one transaction.
        upgrading = partition_staging.needed(conn)
        while todo := _pending(conn, through):
            group = [todo[0], *_until_staged(todo[1:])] if upgrading else todo
            staged = _STAGED.get(group[0].version)
            # Still one table here: only the staged migration changes that (and the lock
            # keeps other migrators out meanwhile).
            if upgrading and staged is not None:
                staged.stage(conn, batch_rows=batch_rows, progress=progress)
                _apply(conn, group, lock_timeout=_SWAP_LOCK_TIMEOUT)
            else:
                _apply(conn, group, lock_timeout=None)
            applied += [m.version for m in group]
        # Today's partition of finished jobs and the next days' (migration 0014), so a
        # database migrated long after 0014 starts with them; maintenance keeps them ahead.
        with conn.transaction():
            row = conn.execute("select to_regproc('tickq.jobs_partitions_ensure') is not null")
            if (found := row.fetchone()) and found[0]:
                partitions.ensure(conn)
            # The live partition's statistics (migration 0016), which a dump and restore
            # does not carry: without them a backlog on it was scanned whole.
            row = conn.execute("select to_regproc('tickq.jobs_live_id_statistics') is not null")
            if (found := row.fetchone()) and found[0]:
                conn.execute("select tickq.jobs_live_id_statistics()")
    finally:
        if not conn.closed:
            with conn.transaction():
                conn.execute("select pg_advisory_unlock(%s)", (_LOCK_KEY,))
    return applied


def _until_staged(migrations: list[Migration]) -> list[Migration]:
    """The migrations up to the next one with a staging step, which starts a group."""
    group: list[Migration] = []
    for migration in migrations:
        if migration.version in _STAGED:
            break
        group.append(migration)
    return group


def _pending(conn: psycopg.Connection[Any], through: str | None = None) -> list[Migration]:
    with conn.transaction():
        done = set(_done(conn))
    return [
        m
        for m in available()
        if m.version not in done
        and (through is None or m.version <= through or m.version.startswith(through))
    ]


def _done(conn: psycopg.Connection[Any]) -> list[str]:
    exists = conn.execute("select to_regclass('tickq.schema_migrations') is not null").fetchone()
    if not (exists and exists[0]):
        return []
    return [row[0] for row in conn.execute("select version from tickq.schema_migrations")]


def _apply(
    conn: psycopg.Connection[Any], group: list[Migration], *, lock_timeout: str | None
) -> None:
    def apply() -> None:
        conn.execute("create schema if not exists tickq")
        conn.execute(
            "create table if not exists tickq.schema_migrations ("
            " version text primary key,"
            " applied_at timestamptz not null default now())"
        )
        for migration in group:
            conn.execute(migration.sql.encode())
            conn.execute(
                "insert into tickq.schema_migrations (version) values (%s)",
                (migration.version,),
            )

    if lock_timeout is None:
        with conn.transaction():
            apply()
    else:
        partition_staging.locking(conn, apply, lock_timeout, _SWAP_ATTEMPTS, 0.1)


def pending(conn: psycopg.Connection) -> list[str]:
    done = set(_done(conn))
    return [m.version for m in available() if m.version not in done]
