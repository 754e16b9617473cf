"""tickq through its public API: enqueue / enqueue_many, Runner.tick and Runner.work."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

import queue_core
from bench.processes import await_starts
from queue_core import Job, PostgresStore, Registry, Runner
from queue_core.migrate import migrate

from . import System

CHUNK = 1000
registry = Registry()
_started: dict[str, float] = {}


@registry.task("noop")
def noop(job: Any) -> None:
    """No work: the measured cost is the queue's."""


@registry.task("stamp")
def stamp(job: Any) -> None:
    """Record when the handler started, for end-to-end latency."""
    _started[str(job.id)] = time.time()


def install(url: str) -> None:
    with psycopg.connect(url) as conn:
        migrate(conn)


def bulk_enqueue(url: str, n: int) -> float:
    """Chunks of CHUNK jobs per statement, each job with its own idempotency key."""
    run = secrets.token_hex(4)  # keys unique to this call: every job is new
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        for first in range(0, n, CHUNK):
            requests = [
                {"type": "noop", "idempotency_key": f"{run}-{i}"}
                for i in range(first, min(n, first + CHUNK))
            ]
            queue_core.enqueue_many(conn, requests, using=registry)
        return time.perf_counter() - started


def single_enqueue(url: str, n: int) -> float:
    """One job per call on an autocommit connection: one statement, one commit each.

    Through a long-lived store, as a service holding one would: `queue_core.enqueue(conn)`
    builds a store per call, whose first operation also reads the limit tables.
    """
    with psycopg.connect(url, autocommit=True) as conn:
        store = PostgresStore(conn)
        started = time.perf_counter()
        for _ in range(n):
            store.enqueue(registry.spec("noop"))
        return time.perf_counter() - started


class _StopWhenDrained(PostgresStore):
    """A store that sets `drained` once a claim comes back short: the backlog is gone."""

    def __init__(self, conn: psycopg.Connection[Any], drained: threading.Event) -> None:
        super().__init__(conn)
        self.drained = drained

    def claim(self, **options: Any) -> list[Job]:
        jobs = super().claim(**options)
        if len(jobs) < options.get("limit", 10):
            self.drained.set()
        return jobs


def prepare_drain(url: str, batch: int, variant: str) -> Callable[[], int]:
    """`tick`: one Lambda-style tick drains the backlog; `work`: the long-running loop."""
    conn = psycopg.connect(url, autocommit=True)
    drained = threading.Event()
    runner = Runner(_StopWhenDrained(conn, drained), registry, batch_size=batch, concurrency=1)

    def run() -> int:
        if variant == "tick":
            report = runner.tick()
        else:
            report = runner.work(stop=drained, poll_interval=0.05)
        conn.close()
        return report.succeeded

    return run


def latency_worker(url: str, expected: Any, ready: Any, out: Any) -> None:
    """A long-running worker idling until it has started the number of jobs the harness
    puts on `expected`; reports each job's handler start time."""
    with psycopg.connect(url, autocommit=True) as conn:
        runner = Runner(PostgresStore(conn), registry, batch_size=100, concurrency=1)
        halt = threading.Event()

        def relay() -> None:
            await_starts(expected, _started)
            halt.set()

        threading.Thread(target=relay, daemon=True).start()
        ready.put(None)
        runner.work(stop=halt)
    out.put(dict(_started))


def latency_producer(url: str, count: int, interval: float) -> dict[str, float]:
    with psycopg.connect(url, autocommit=True) as conn:
        committed: dict[str, float] = {}
        for _ in range(count):
            result = queue_core.enqueue(conn, "stamp", using=registry)
            committed[str(result.id)] = time.time()
            time.sleep(interval)
        return committed


def batch_round_trips(url: str, batch_sizes: Sequence[int]) -> dict[int, float]:
    """Protocol round trips (ReadyForQuery messages) per claim→run→finish batch, counted
    from libpq's trace of the worker's connection."""
    from bench.roundtrips import count_round_trips

    out: dict[int, float] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        store = PostgresStore(conn)
        runner = Runner(store, registry, batch_size=1, concurrency=1)
        for size in batch_sizes:
            queue_core.enqueue_many(conn, [{"type": "noop"}] * (size * 20), using=registry)
            runner.batch_size = size
            report = queue_core.TickReport()
            # Steady state of a busy worker, as tick() and work() run it: each statement
            # persists one batch and leases the next (overlapped with the batch in between).
            # Warm up first: psycopg prepares a statement on its 5th use, one extra trip, and
            # the statement with and without outcomes to persist are two prepared variants.
            for _ in range(10):
                runner.run_batch(report, claim_next=lambda: True, overlap=True)
            with count_round_trips(conn) as counter:
                for _ in range(3):
                    runner.run_batch(report, claim_next=lambda: True, overlap=True)
            out[size] = counter.count / 3
            while runner.run_batch(report, overlap=True):  # what the last statements leased
                pass
    return out


SYSTEM = System(
    name="tickq",
    install=install,
    bulk_enqueue=bulk_enqueue,
    single_enqueue=single_enqueue,
    prepare_drain=prepare_drain,
    drain_variants=("tick", "work"),
    latency_worker=latency_worker,
    latency_producer=latency_producer,
)
