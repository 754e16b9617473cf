"""The Python API keeps one store per caller connection (its cache of set limits spares
each enqueue a round trip), and lets go of it with the connection: a service that opens a
connection per request must not keep every one it ever used."""

from __future__ import annotations

import gc
import weakref

import psycopg

import queue_core


def test_a_connection_used_by_enqueue_is_freed_once_the_caller_drops_it(
    database_url: str, clean_tables: None
) -> None:
    conn = psycopg.connect(database_url, autocommit=True)
    first = queue_core.enqueue(conn, "per-connection", {"n": 1})
    second = queue_core.enqueue(conn, "per-connection", {"n": 2})
    assert first.job.id != second.job.id
    gone = weakref.ref(conn)
    conn.close()
    del conn
    gc.collect()

    assert gone() is None, "the store cache still holds the caller's connection"
