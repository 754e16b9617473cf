"""The one PostgreSQL server a benchmark run uses, and a fresh database per system."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from tickq.infra.local.postgres import LocalPostgres, create_database, database_url, drop_database

# Stock durability: every commit waits for its WAL flush, as on a production server.
# The other settings only size the server for a few dozen benchmark connections.
DURABLE_SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "max_connections": "100",
}


@contextmanager
def benchmark_server(url: str | None) -> Iterator[str]:
    """Yield a superuser URL: `url` when given, else a throwaway durable local server."""
    if url:
        yield url
        return
    with LocalPostgres(fsync=True, settings=DURABLE_SETTINGS) as server:
        yield server.url


@contextmanager
def env_or_local_server() -> Iterator[str]:
    """Yield a superuser URL: TICKQ_DATABASE_URL when set, else a throwaway local server
    with the launcher's defaults (the focused cost benchmarks compare ratios within one run,
    so they do not need the durable settings of the full comparison)."""
    external = os.environ.get("TICKQ_DATABASE_URL")
    if external:
        yield external
        return
    with LocalPostgres() as server:
        yield server.url


@contextmanager
def fresh_database(admin_url: str, system: str) -> Iterator[str]:
    """An empty database for one system's measurement, dropped afterwards."""
    name = f"bench_{system}_{secrets.token_hex(3)}"
    create_database(admin_url, name)
    try:
        yield database_url(admin_url, name)
    finally:
        drop_database(admin_url, name)


def server_description(admin_url: str) -> dict[str, str]:
    """Version and durability settings, recorded with every result."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        names = ["server_version", "fsync", "synchronous_commit", "full_page_writes"]
        row = conn.execute(
            "select array_agg(current_setting(n)) from unnest(%s::text[]) n", (names,)
        ).fetchone()
    assert row is not None
    return dict(zip(names, row[0], strict=True))
