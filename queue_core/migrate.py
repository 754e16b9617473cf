"""Versioned SQL migrations shipped inside the package, applied once each, in order."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import psycopg

# Any stable 64-bit number; it serialises concurrent migrators across the whole cluster.
_LOCK_KEY = 0x7469636B71  # "tickq"


@dataclass(frozen=True, slots=True)
class Migration:
    version: str
    sql: str


def available() -> list[Migration]:
    folder = resources.files("queue_core") / "migrations"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [Migration(f.name.removesuffix(".sql"), f.read_text(encoding="utf-8")) for f in files]


def migrate(conn: psycopg.Connection) -> list[str]:
    """Apply pending migrations in one transaction; returns the versions applied.

    Safe to run from several processes at once: the advisory lock is taken before anything
    is read, so a second migrator waits, then finds the work done.
    """
    applied: list[str] = []
    with conn.transaction():
        conn.execute("select pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute("create schema if not exists tickq")
        conn.execute(
            "create table if not exists tickq.schema_migrations ("
            " version text primary key,"
            " applied_at timestamptz not null default now())"
        )
        done = {row[0] for row in conn.execute("select version from tickq.schema_migrations")}
        for migration in available():
            if migration.version in done:
                continue
            conn.execute(migration.sql.encode())
            conn.execute(
                "insert into tickq.schema_migrations (version) values (%s)", (migration.version,)
            )
            applied.append(migration.version)
        # Today's partition of finished jobs and the next days' (migration 0014), so a
        # database migrated long after 0014 starts with them; maintenance keeps them ahead.
        row = conn.execute("select to_regproc('tickq.jobs_partitions_ensure') is not null")
        if (found := row.fetchone()) and found[0]:
            conn.execute("select tickq.jobs_partitions_ensure((now() at time zone 'UTC')::date, 3)")
        # The live partition's statistics on ids (migration 0016), which a dump and restore
        # does not carry: without them a backlog after an empty ANALYZE is scanned whole.
        row = conn.execute("select to_regproc('tickq.jobs_live_id_statistics') is not null")
        if (found := row.fetchone()) and found[0]:
            conn.execute("select tickq.jobs_live_id_statistics()")
    return applied


def pending(conn: psycopg.Connection) -> list[str]:
    exists = conn.execute("select to_regclass('tickq.schema_migrations') is not null").fetchone()
    done: set[str] = set()
    if exists and exists[0]:
        done = {row[0] for row in conn.execute("select version from tickq.schema_migrations")}
    return [m.version for m in available() if m.version not in done]
