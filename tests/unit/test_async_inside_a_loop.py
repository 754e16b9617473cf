"""Async handlers run when the runner is called from a thread that already runs an event
loop (an async application calling `Runner.tick`, a test framework's loop), where
asyncio.run refuses: the handlers' coroutines then run on a loop in a thread of their own."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from queue_core import JobContext, Registry, Runner
from queue_core.model.jobs import Status
from queue_core.model.validation import job_spec
from queue_core.runner.timeouts import run_async
from queue_core.store.memory import MemoryStore


def in_a_fresh_thread(coroutine: Any) -> Any:
    """asyncio.run(coroutine) in a thread of its own: the test's loop is then its own,
    whatever loop the test process's main thread runs (a browser test's)."""
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(asyncio.run(coroutine)))
    thread.start()
    thread.join()
    return results[0]


def test_an_async_handler_runs_when_the_caller_runs_an_event_loop() -> None:
    registry = Registry()

    @registry.task("fetch")
    async def fetch(job: JobContext) -> Any:
        await asyncio.sleep(0)
        return {"n": job.payload["n"] * 2}

    store = MemoryStore()
    job = store.enqueue(job_spec("fetch", {"n": 21}))

    async def application() -> None:
        with Runner(store, registry) as runner:
            runner.tick()

    in_a_fresh_thread(application())

    done = store.get(job.id)
    assert (done.status, done.result) == (Status.SUCCEEDED, {"n": 42})


def test_run_async_inside_and_outside_a_running_loop() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    async def inside() -> int:
        return run_async(answer())

    assert in_a_fresh_thread(inside()) == 42
    assert run_async(answer()) == 42
