"""One module per queue under test, each with the same functions (see `System`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg


@dataclass(frozen=True)
class System:
    """What the harness needs from a queue: install, enqueue, and drain/latency workers.

    `prepare_drain` and `latency_worker` run inside worker processes, so they are plain
    module-level functions (picklable by name).
    """

    name: str
    install: Callable[[str], None]
    bulk_enqueue: Callable[[str, int], float]
    single_enqueue: Callable[[str, int], float]
    prepare_drain: Callable[..., Callable[[], int]] | None
    drain_variants: tuple[str, ...]
    latency_worker: Callable[..., None] | None
    latency_producer: Callable[[str, int, float], dict[str, float]] | None
    max_drain_jobs: int | None = None  # a slow peer drains a smaller backlog


def all_systems() -> list[System]:
    from . import awa_side, pgqueuer_side, procrastinate_side, raw_side, slim_side, tickq_side

    return [
        tickq_side.SYSTEM,
        raw_side.SYSTEM,
        slim_side.SYSTEM,
        pgqueuer_side.SYSTEM,
        procrastinate_side.SYSTEM,
        awa_side.SYSTEM,
    ]


def noop(*_: Any, **__: Any) -> None:
    """The handler every system runs: no work, so the queue itself is measured."""


def timed_single_inserts(url: str, n: int, insert: str) -> float:
    """`n` runs of a one-job insert taking an empty `payload`, each its own commit; seconds."""
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        for _ in range(n):
            conn.execute(insert, {"payload": "{}"})
        return time.perf_counter() - started


def claim_ack_loop(url: str, batch: int, claim: str, ack: str) -> Callable[[], int]:
    """A bare psycopg drain, connected now: claim up to `batch` jobs (`claim` returns their
    ids first), ack them by id array, until a claim comes back short; returns the jobs done."""
    conn = psycopg.connect(url, autocommit=True)

    def run() -> int:
        done = 0
        with conn.cursor() as cur:
            while True:
                try:
                    rows = cur.execute(claim, {"limit": batch}).fetchall()
                except psycopg.errors.SerializationFailure:
                    # A job another worker claimed and finished since this claim's snapshot
                    # moved to another partition (tickq's table): SKIP LOCKED raises instead
                    # of skipping it. The claim is its own transaction, so it runs again (as
                    # tickq's store does).
                    continue
                if rows:
                    cur.execute(ack, {"ids": [row[0] for row in rows]})
                done += len(rows)
                if len(rows) < batch:
                    break
        conn.close()
        return done

    return run
