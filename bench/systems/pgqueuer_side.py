"""PgQueuer 1.6 through its documented API: Queries.enqueue and QueueManager.run."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from typing import Any

import asyncpg
from pgqueuer import AsyncpgDriver, Job, QueueManager
from pgqueuer.domain.types import QueueExecutionMode
from pgqueuer.queries import Queries

from bench.processes import await_starts

from . import System, tickq_side


async def _queries(url: str) -> tuple[asyncpg.Connection, Queries]:
    conn = await asyncpg.connect(url)
    return conn, Queries(AsyncpgDriver(conn))


def install(url: str) -> None:
    async def go() -> None:
        conn, queries = await _queries(url)
        await queries.install()
        await conn.close()

    asyncio.run(go())


def bulk_enqueue(url: str, n: int) -> float:
    """Chunks as large as tickq's, each job with its own dedupe key (like tickq's keys)."""

    async def go() -> float:
        conn, queries = await _queries(url)
        run = secrets.token_hex(4)
        started = time.perf_counter()
        for first in range(0, n, tickq_side.CHUNK):
            size = min(n, first + tickq_side.CHUNK) - first
            await queries.enqueue(
                ["noop"] * size,
                [None] * size,
                [0] * size,
                dedupe_key=[f"{run}-{i}" for i in range(first, first + size)],
            )
        elapsed = time.perf_counter() - started
        await conn.close()
        return elapsed

    return asyncio.run(go())


def single_enqueue(url: str, n: int) -> float:
    async def go() -> float:
        conn, queries = await _queries(url)
        started = time.perf_counter()
        for _ in range(n):
            await queries.enqueue("noop", None)
        elapsed = time.perf_counter() - started
        await conn.close()
        return elapsed

    return asyncio.run(go())


def prepare_drain(url: str, batch: int, variant: str) -> Callable[[], int]:
    """QueueManager in drain mode: exits once the queue is empty and in-flight jobs end."""
    loop = asyncio.new_event_loop()
    conn, queries = loop.run_until_complete(_queries(url))
    manager = QueueManager(queries)
    done = 0

    @manager.entrypoint("noop")
    async def noop(job: Job) -> None:
        nonlocal done
        done += 1

    def run() -> int:
        loop.run_until_complete(manager.run(batch_size=batch, mode=QueueExecutionMode.drain))
        loop.run_until_complete(conn.close())
        loop.close()
        return done

    return run


def latency_worker(url: str, expected: Any, ready: Any, out: Any) -> None:
    """A continuous QueueManager (LISTEN/NOTIFY is built in) until it has started the
    number of jobs the harness puts on `expected`."""

    async def go() -> dict[str, float]:
        conn, queries = await _queries(url)
        manager = QueueManager(queries)
        started: dict[str, float] = {}

        @manager.entrypoint("stamp")
        async def stamp(job: Job) -> None:
            started[str(job.id)] = time.time()

        async def watch() -> None:
            await asyncio.to_thread(await_starts, expected, started)
            manager.shutdown.set()

        watcher = asyncio.create_task(watch())
        ready.put(None)
        await manager.run(batch_size=100)
        await watcher
        await conn.close()
        return started

    out.put(asyncio.run(go()))


def latency_producer(url: str, count: int, interval: float) -> dict[str, float]:
    async def go() -> dict[str, float]:
        conn, queries = await _queries(url)
        committed: dict[str, float] = {}
        for _ in range(count):
            ids = await queries.enqueue("stamp", None)
            committed[str(ids[0])] = time.time()
            await asyncio.sleep(interval)
        await conn.close()
        return committed

    return asyncio.run(go())


SYSTEM = System(
    name="pgqueuer",
    install=install,
    bulk_enqueue=bulk_enqueue,
    single_enqueue=single_enqueue,
    prepare_drain=prepare_drain,
    drain_variants=("drain",),
    latency_worker=latency_worker,
    latency_producer=latency_producer,
)
