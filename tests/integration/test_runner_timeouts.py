"""Timeouts that stop the handler, against a real database: an async handler is cancelled,
a process-isolated one killed, a plain one abandoned with its late outcome discarded; each
attempt fails with "timed out after N s" and retries with backoff like any failure."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest

from queue_core import JobContext, PostgresStore, Registry, Runner, Status
from queue_core.errors import HandlerTimedOut
from tests import timeout_tasks

LATER = {"base": 600, "max": 600}  # a retry stays out of the tick that failed it
INSTANT = {"base": 0.001, "max": 0.001}


@pytest.fixture
def store(conn: psycopg.Connection) -> PostgresStore:
    return PostgresStore(conn)


def enqueue(store: PostgresStore, registry: Registry, type_: str, **options: Any) -> UUID:
    return store.enqueue(registry.spec(type_, **options)).id


def runner(store: PostgresStore, registry: Registry, **options: Any) -> Runner:
    options.setdefault("rand", lambda: 0.0)
    return Runner(store, registry, **options)


def wait_until(condition: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_an_async_handler_is_cancelled_at_its_timeout_and_the_next_job_runs(
    store: PostgresStore,
) -> None:
    registry = Registry()
    cancelled = []

    @registry.task("hang", timeout=2, backoff=LATER)
    async def hang(job: JobContext) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(job.id)
            raise
        return "late"

    @registry.task("quick")
    async def quick(job: JobContext) -> str:
        return "done"

    slow = enqueue(store, registry, "hang", priority=1)
    fast = enqueue(store, registry, "quick")

    started = time.monotonic()
    with runner(store, registry, batch_size=1) as r:
        report = r.tick()
    elapsed = time.monotonic() - started

    job = store.get(slow)
    assert (job.status, job.error, job.result) == (
        Status.RETRYING,
        "timed out after 2 s (cancelled)",
        None,
    )
    assert cancelled == [slow]
    assert store.get(fast).status is Status.SUCCEEDED
    assert report.timed_out == 1 and report.retried == 1 and report.succeeded == 1
    assert elapsed < 20  # stopped near its 2 s, far from the handler's 30


def test_a_jobs_own_timeout_overrides_its_tasks(store: PostgresStore) -> None:
    registry = Registry()

    @registry.task("nap", timeout=60, backoff=LATER)
    async def nap(job: JobContext) -> None:
        await asyncio.sleep(30)

    job_id = enqueue(store, registry, "nap", timeout=1)
    with runner(store, registry) as r:
        r.tick()

    assert store.get(job_id).error == "timed out after 1 s (cancelled)"


def test_a_process_isolated_handler_is_killed_at_its_timeout(
    store: PostgresStore, tmp_path: Path
) -> None:
    registry = Registry()
    registry.task("hang", timeout=2, isolation="process", backoff=LATER)(
        timeout_tasks.sleep_then_write
    )
    pid_file, marker = tmp_path / "pid", tmp_path / "marker"
    job_id = enqueue(
        store,
        registry,
        "hang",
        payload={"pid_file": str(pid_file), "marker": str(marker), "sleep": 30},
    )

    with runner(store, registry) as r:
        report = r.tick()

    job = store.get(job_id)
    assert (job.status, job.error) == (Status.RETRYING, "timed out after 2 s (killed)")
    assert report.timed_out == 1
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped: no code of it runs again
        os.kill(pid, 0)
    time.sleep(1)
    assert not marker.exists()


def test_a_process_isolated_handler_returns_its_result_and_its_errors(
    store: PostgresStore,
) -> None:
    registry = Registry()
    registry.task("double", isolation="process", timeout=30)(timeout_tasks.double)
    registry.task("refuse", isolation="process", backoff=LATER)(timeout_tasks.refuse)
    doubled = enqueue(store, registry, "double", payload={"n": 21})
    failed = enqueue(store, registry, "refuse")
    dead = enqueue(store, registry, "refuse", payload={"permanent": True})

    with runner(store, registry) as r:
        r.tick()

    result = store.get(doubled).result
    assert (result["n"], result["attempt"]) == (42, 1)
    assert result["pid"] != os.getpid()  # it ran in a child
    assert (store.get(failed).status, store.get(failed).error) == (
        Status.RETRYING,
        "ValueError: boom",
    )
    assert (store.get(dead).status, store.get(dead).error) == (
        Status.DEAD,
        "PermanentError: never",
    )


def test_a_plain_handlers_late_outcome_is_never_stored(store: PostgresStore) -> None:
    registry = Registry()
    release = threading.Event()
    late: list[BaseException | str] = []

    @registry.task("hang", timeout=1, max_attempts=1)
    def hang(job: JobContext) -> str:
        release.wait(30)
        try:
            job.progress({"late": True})
        except BaseException as exc:
            late.append(exc)
        late.append("returned")
        return "late result"

    job_id = enqueue(store, registry, "hang")
    with runner(store, registry) as r:
        report = r.tick()
        job = store.get(job_id)
        assert (job.status, job.error) == (Status.DEAD, "timed out after 1 s (abandoned)")
        assert report.timed_out == 1 and report.dead == 1
        assert report.abandoned_handlers == 1 and r.abandoned.running == 1

        release.set()  # the abandoned handler goes on, and returns
        wait_until(lambda: r.abandoned.running == 0)

    assert isinstance(late[0], HandlerTimedOut) and late[1] == "returned"
    job = store.get(job_id)
    assert (job.status, job.error, job.result, job.progress) == (
        Status.DEAD,
        "timed out after 1 s (abandoned)",
        None,
        None,
    )


def test_steps_completed_before_a_timeout_stay_completed(store: PostgresStore) -> None:
    registry = Registry()
    release = threading.Event()
    ran: list[str] = []

    @registry.task("stepped", timeout=1, backoff=INSTANT)
    def stepped(job: JobContext) -> str:
        first = job.step("first", lambda: ran.append("first") or "one")
        if job.attempt == 1:
            release.wait(30)  # past the timeout on the first attempt only
        return first

    job_id = enqueue(store, registry, "stepped")
    with runner(store, registry) as r:
        r.tick()
        assert store.get(job_id).error == "timed out after 1 s (abandoned)"
        release.set()
        wait_until(lambda: r.abandoned.running == 0)
        wait_until(lambda: r.tick().succeeded == 1 or store.get(job_id).is_terminal)

    job = store.get(job_id)
    assert (job.status, job.result, job.attempts) == (Status.SUCCEEDED, "one", 2)
    assert ran == ["first"]  # the second attempt read the stored step


def test_a_tick_does_not_start_a_handler_whose_timeout_does_not_fit(
    store: PostgresStore,
) -> None:
    registry = Registry()
    calls = []

    @registry.task("long", timeout=60)
    def long(job: JobContext) -> None:
        calls.append(job.id)

    @registry.task("short", timeout=2)
    async def short(job: JobContext) -> None:
        calls.append(job.id)

    put_back = enqueue(store, registry, "long")
    fits = enqueue(store, registry, "short")
    with runner(store, registry, time_left=lambda: 10.0) as r:
        r.tick()

    assert calls == [fits]
    job = store.get(put_back)
    # Given back with its attempt, for after this invocation (not claimed again by it).
    assert (job.status, job.max_attempts - job.attempts, job.error) == (Status.QUEUED, 3, None)
    assert job.run_after > datetime.now(UTC) + timedelta(seconds=5)
