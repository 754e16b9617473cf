"""Procrastinate 3.10 through its documented API: batch_defer_async, defer_async, workers."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import procrastinate

from bench.processes import await_starts

from . import System

CHUNK = 1000
# Procrastinate fetches one job per query, so it drains a few hundred jobs per second;
# a smaller backlog gives the same rate without stretching the run.
MAX_DRAIN_JOBS = 2000
CONCURRENCY = 10


def _app(url: str) -> tuple[procrastinate.App, dict[str, float], list[int]]:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
    started: dict[str, float] = {}
    done = [0]

    @app.task(name="noop", pass_context=False)
    async def noop() -> None:
        done[0] += 1

    @app.task(name="stamp", pass_context=True)
    async def stamp(context: procrastinate.JobContext) -> None:
        assert context.job is not None
        started[str(context.job.id)] = time.time()

    return app, started, done


def install(url: str) -> None:
    async def go() -> None:
        app, _, _ = _app(url)
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    asyncio.run(go())


def bulk_enqueue(url: str, n: int) -> float:
    async def go() -> float:
        app, _, _ = _app(url)
        async with app.open_async():
            task = app.tasks["noop"]
            started = time.perf_counter()
            for first in range(0, n, CHUNK):
                await task.batch_defer_async(*({} for _ in range(first, min(n, first + CHUNK))))
            return time.perf_counter() - started

    return asyncio.run(go())


def single_enqueue(url: str, n: int) -> float:
    async def go() -> float:
        app, _, _ = _app(url)
        async with app.open_async():
            task = app.tasks["noop"]
            started = time.perf_counter()
            for _ in range(n):
                await task.defer_async()
            return time.perf_counter() - started

    return asyncio.run(go())


def prepare_drain(url: str, batch: int, variant: str) -> Callable[[], int]:
    """A worker with wait=False: it stops once it has caught up with the queue."""
    loop = asyncio.new_event_loop()
    app, _, done = _app(url)
    opened = app.open_async()
    loop.run_until_complete(opened.__aenter__())

    def run() -> int:
        loop.run_until_complete(
            app.run_worker_async(wait=False, concurrency=CONCURRENCY, install_signal_handlers=False)
        )
        loop.run_until_complete(opened.__aexit__(None, None, None))
        loop.close()
        return done[0]

    return run


def latency_worker(url: str, expected: Any, ready: Any, out: Any) -> None:
    async def go() -> dict[str, float]:
        app, started, _ = _app(url)
        async with app.open_async():
            worker = asyncio.create_task(
                app.run_worker_async(concurrency=CONCURRENCY, install_signal_handlers=False)
            )
            ready.put(None)
            await asyncio.to_thread(await_starts, expected, started)
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        return started

    out.put(asyncio.run(go()))


def latency_producer(url: str, count: int, interval: float) -> dict[str, float]:
    async def go() -> dict[str, float]:
        app, _, _ = _app(url)
        committed: dict[str, float] = {}
        async with app.open_async():
            task = app.tasks["stamp"]
            for _ in range(count):
                job_id = await task.defer_async()
                committed[str(job_id)] = time.time()
                await asyncio.sleep(interval)
        return committed

    return asyncio.run(go())


SYSTEM = System(
    name="procrastinate",
    install=install,
    bulk_enqueue=bulk_enqueue,
    single_enqueue=single_enqueue,
    prepare_drain=prepare_drain,
    drain_variants=("worker",),
    latency_worker=latency_worker,
    latency_producer=latency_producer,
    max_drain_jobs=MAX_DRAIN_JOBS,
)
