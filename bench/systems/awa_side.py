"""awa 0.6 (`awa-pg`) through its documented Python API: enqueue_many_copy, insert, and
AsyncClient.start workers, on its default queue-storage engine.

awa's Rust core connects through sqlx, which takes neither libpq's `user@` with an empty
host nor keyword conninfo strings, so every URL is rewritten into the query-parameter form
both libpq and sqlx read (`postgresql:///db?host=…&port=…&user=…`).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import awa
from psycopg.conninfo import conninfo_to_dict

from bench.processes import await_starts

from . import System, tickq_side

QUEUE = "bench"
# Smaller than the others' 20 000: a few thousand jobs per second at batch 100 and a few
# hundred at batch 10 on this machine; a rate is a rate.
MAX_DRAIN_JOBS = 5000
# Twice the claim batch: a no-op job holds its permit until its completion is durable,
# so with permits equal to the batch the next claim waits for the last batch's commit.
# PgQueuer, whose completions are buffered too, refuses a cap below twice its batch.
PERMITS_PER_BATCH = 2
POLL_SECONDS = 0.02  # how often a drain asks whether the backlog is gone


@dataclass
class Noop:
    """A no-op job; `key` is its own uniqueness key when bulk-enqueued (like tickq's)."""

    key: str = ""


@dataclass
class Stamp:
    """A job whose handler records when it started, for end-to-end latency."""


_CONNINFO_PARAMS = ("host", "port", "user", "password", "sslmode")


def awa_url(url: str) -> str:
    """`url` (libpq URL or keyword conninfo) as `postgresql:///db?host=…` for sqlx."""
    params = conninfo_to_dict(url)
    query = {name: str(params[name]) for name in _CONNINFO_PARAMS if params.get(name)}
    return f"postgresql:///{quote(str(params.get('dbname', 'postgres')))}?{urlencode(query)}"


def _run(make: Callable[[awa.AsyncClient], Coroutine[Any, Any, Any]], url: str) -> Any:
    """`make(client)` on a fresh client in a fresh event loop, connected before `make`
    runs (so no timing includes the connection); the pool closed after."""

    async def go() -> Any:
        client = awa.AsyncClient(awa_url(url))
        try:
            await client.health_check()
            return await make(client)
        finally:
            await client.close()

    return asyncio.run(go())


def install(url: str) -> None:
    """Migrate, then start a worker once: awa finalizes a fresh database to its
    queue-storage engine when the first worker starts (its quickstart starts one before
    the first enqueue), and the COPY enqueue needs that engine."""

    async def go(client: awa.AsyncClient) -> None:
        await client.migrate()
        client.task(Noop, kind="noop", queue=QUEUE)(_noop)
        await client.start([(QUEUE, 1)])
        await client.shutdown()
        status = json.loads(await client.storage_status())
        if status["active_engine"] != "queue_storage":
            raise RuntimeError(f"awa did not finalize to queue storage: {status['state']}")

    _run(go, url)


async def _noop(job: awa.Job[Noop]) -> None:
    """No work: the measured cost is the queue's."""


def bulk_enqueue(url: str, n: int) -> float:
    """COPY chunks as large as tickq's (`enqueue_many_copy`, awa's high-volume producer
    path), each job unique by its args, which hold a key of its own (like tickq's keys)."""

    async def go(client: awa.AsyncClient) -> float:
        run = secrets.token_hex(4)
        started = time.perf_counter()
        for first in range(0, n, tickq_side.CHUNK):
            jobs = [Noop(f"{run}-{i}") for i in range(first, min(n, first + tickq_side.CHUNK))]
            await client.enqueue_many_copy(
                jobs, kind="noop", queue=QUEUE, unique_opts={"by_args": True}
            )
        return time.perf_counter() - started

    return float(_run(go, url))


def single_enqueue(url: str, n: int) -> float:
    """`insert` per job: one statement, one commit each."""

    async def go(client: awa.AsyncClient) -> float:
        started = time.perf_counter()
        for _ in range(n):
            await client.insert(Noop(), kind="noop", queue=QUEUE)
        return time.perf_counter() - started

    return float(_run(go, url))


async def _until_drained(client: awa.AsyncClient) -> None:
    """Wait until the queue has nothing left to claim and this worker holds nothing:
    awa's workers never stop by themselves, and health_check reads the queue's
    enqueue and claim heads (two sequences), which costs next to nothing."""
    while True:
        queue = (await client.health_check()).queues[QUEUE]
        if queue.available == 0 and queue.in_flight == 0:
            return
        await asyncio.sleep(POLL_SECONDS)


def prepare_drain(url: str, batch: int, variant: str) -> Callable[[], int]:
    """A worker claiming `batch` jobs per query, stopped (gracefully: in-flight jobs and
    their completions finish) once the backlog is gone; returns the handler runs."""
    loop = asyncio.new_event_loop()
    done = 0

    async def connect() -> awa.AsyncClient:
        client = awa.AsyncClient(awa_url(url))

        @client.task(Noop, kind="noop", queue=QUEUE)  # binds to the running loop
        async def noop(job: awa.Job[Noop]) -> None:
            nonlocal done
            done += 1

        await client.health_check()  # connected before the clock starts
        return client

    client = loop.run_until_complete(connect())
    config = {"name": QUEUE, "max_workers": PERMITS_PER_BATCH * batch, "claim_batch_size": batch}

    async def drain() -> None:
        await client.start([config])
        await _until_drained(client)
        await client.shutdown()
        await client.close()

    def run() -> int:
        loop.run_until_complete(drain())
        loop.close()
        return done

    return run


def latency_worker(url: str, expected: Any, ready: Any, out: Any) -> None:
    """A running worker (claim batch 100, as the others'), idle until it has started the
    number of jobs the harness puts on `expected`."""

    async def go(client: awa.AsyncClient) -> dict[str, float]:
        started: dict[str, float] = {}

        @client.task(Stamp, kind="stamp", queue=QUEUE)
        async def stamp(job: awa.Job[Stamp]) -> None:
            started[str(job.id)] = time.time()

        await client.start([{"name": QUEUE, "max_workers": 100, "claim_batch_size": 100}])
        ready.put(None)
        await asyncio.to_thread(await_starts, expected, started)
        await client.shutdown()
        return started

    out.put(_run(go, url))


def latency_producer(url: str, count: int, interval: float) -> dict[str, float]:
    async def go(client: awa.AsyncClient) -> dict[str, float]:
        committed: dict[str, float] = {}
        for _ in range(count):
            job = await client.insert(Stamp(), kind="stamp", queue=QUEUE)
            committed[str(job.id)] = time.time()
            await asyncio.sleep(interval)
        return committed

    result: dict[str, float] = _run(go, url)
    return result


SYSTEM = System(
    name="awa",
    install=install,
    bulk_enqueue=bulk_enqueue,
    single_enqueue=single_enqueue,
    prepare_drain=prepare_drain,
    drain_variants=("worker",),
    latency_worker=latency_worker,
    latency_producer=latency_producer,
    max_drain_jobs=MAX_DRAIN_JOBS,
)
