"""The frozen baseline: a database as the unreleased migrations through 0038 left it.

baseline_0038.sql.gz is a schema-only dump taken when those migrations were folded into the
current-state files (its first lines say how it was made). It is test data, never edited:
it holds the function definitions of that time, which the migrator replaces from the
function files when it brings the database up to date. Kept compressed, so that the project's
only SQL for a function is its file in queue_core/schema/functions/.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import psycopg

SNAPSHOT = Path(__file__).with_name("baseline_0038.sql.gz")


def load_baseline(url: str) -> None:
    """Make the database at `url` (empty) what migrations through 0038 made, in one transaction."""
    text = gzip.decompress(SNAPSHOT.read_bytes()).decode("utf-8")
    with psycopg.connect(url) as conn, conn.transaction():
        conn.execute(text.encode())
