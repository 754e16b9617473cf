"""Counting protocol round trips on a psycopg connection from libpq's own trace."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from psycopg import pq


@dataclass
class RoundTrips:
    count: int = 0


@contextmanager
def count_round_trips(conn: Any) -> Iterator[RoundTrips]:
    """Count the server's ReadyForQuery messages while the block runs.

    The server sends exactly one ReadyForQuery at the end of each simple query or each Sync
    of the extended protocol, i.e. once per round trip the client waits for.
    """
    counter = RoundTrips()
    with tempfile.TemporaryFile() as trace:
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield counter
        finally:
            conn.pgconn.untrace()
            trace.seek(0)
            counter.count = sum(
                1
                for line in trace.read().decode(errors="replace").splitlines()
                if line.startswith("B\t") and "\tReadyForQuery" in line
            )
