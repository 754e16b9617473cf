"""The frozen baseline (baseline_0016b.sql): a database as the unreleased migrations left it."""

from __future__ import annotations

from pathlib import Path

import psycopg

SNAPSHOT = Path(__file__).with_name("baseline_0016b.sql")


def load_baseline(url: str) -> None:
    """Make the database at `url` (empty) what migrations 0001-0016b made, in one transaction."""
    with psycopg.connect(url) as conn, conn.transaction():
        conn.execute(SNAPSHOT.read_text(encoding="utf-8").encode())
