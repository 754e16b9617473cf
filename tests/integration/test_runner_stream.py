"""Claims fill the handler slots as they free up (queue_core/runner/stream.py).

A runner of several handlers waited for the slowest job of each batch before claiming the
next: with two slots, one slow job and a backlog of quick ones, the free slot stayed idle
until the slow job ended. Now each freed slot is claimed again at once, and each ended job
is saved while the slow one still runs.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg

from queue_core import JobContext, PostgresStore, Registry, Runner
from queue_core.model.validation import job_spec

QUICK_JOBS = 6


def _count_succeeded(database_url: str, type_: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as other:
        row = other.execute(
            "select count(*) from tickq.jobs where type = %s and status = 'succeeded'", (type_,)
        ).fetchone()
    return int(row[0]) if row else 0


def _registry(database_url: str) -> tuple[Registry, list[str]]:
    registry = Registry()
    runs: list[str] = []

    @registry.task("quick")
    def quick(job: JobContext) -> Any:
        runs.append("quick")
        return None

    @registry.task("slow")
    def slow(job: JobContext) -> Any:
        runs.append("slow")
        # Return once every quick job is saved, or after 20 s (then the assertion below
        # fails): the other slot ran them all meanwhile.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            job.heartbeat()
            if _count_succeeded(database_url, "quick") == QUICK_JOBS:
                return {"quick_saved_while_running": True}
            threading.Event().wait(0.05)
        return {"quick_saved_while_running": False}

    return registry, runs


def _enqueue(store: PostgresStore) -> None:
    store.enqueue_many([job_spec("slow")] + [job_spec("quick") for _ in range(QUICK_JOBS)])


def test_a_tick_runs_the_backlog_in_the_slot_a_slow_job_leaves_free(
    conn: psycopg.Connection, database_url: str
) -> None:
    registry, runs = _registry(database_url)
    store = PostgresStore(conn)
    _enqueue(store)
    with Runner(store, registry, batch_size=2, concurrency=2) as runner:
        report = runner.tick()

    assert report.claimed == 1 + QUICK_JOBS
    assert report.succeeded == 1 + QUICK_JOBS
    result = conn.execute("select result from tickq.jobs where type = 'slow'").fetchone()
    assert result == ({"quick_saved_while_running": True},)
    assert sorted(runs) == ["quick"] * QUICK_JOBS + ["slow"]


def test_a_worker_runs_the_backlog_in_the_slot_a_slow_job_leaves_free(
    conn: psycopg.Connection, database_url: str
) -> None:
    registry, runs = _registry(database_url)
    store = PostgresStore(conn)
    _enqueue(store)
    stop = threading.Event()

    def stop_when_done() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _count_succeeded(database_url, "slow") == 0:
            time.sleep(0.05)
        stop.set()

    watcher = threading.Thread(target=stop_when_done)
    watcher.start()
    with (
        psycopg.connect(database_url, autocommit=True) as own,
        Runner(PostgresStore(own), registry, batch_size=2, concurrency=2) as runner,
    ):
        total = runner.work(stop=stop, poll_interval=0.1)
    watcher.join()

    assert total.succeeded == 1 + QUICK_JOBS
    assert sorted(runs) == ["quick"] * QUICK_JOBS + ["slow"]
    result = conn.execute("select result from tickq.jobs where type = 'slow'").fetchone()
    assert result == ({"quick_saved_while_running": True},)


def test_a_job_that_waited_long_for_a_handler_has_its_lease_renewed_first(
    conn: psycopg.Connection,
) -> None:
    from queue_core.runner.stream import Call, Ended, Stream  # here: the others run on any tree

    registry = Registry()
    ran: list[str] = []

    @registry.task("waited", lease_seconds=30)
    def waited(job: JobContext) -> Any:
        ran.append(str(job.id))
        return None

    store = PostgresStore(conn)
    store.enqueue_many([job_spec("waited"), job_spec("waited")])
    with Runner(store, registry, batch_size=2, concurrency=2) as runner:
        kept, lost = store.claim(limit=2, lease_seconds=30)
        # One job's lease was lost meanwhile: another worker reclaimed and claimed it.
        conn.execute(
            "update tickq.jobs set lease_token = gen_random_uuid() where id = %s", (lost.id,)
        )
        before = conn.execute(
            "select lease_until from tickq.jobs where id = %s", (kept.id,)
        ).fetchone()
        stream = Stream(runner)
        stream.start()
        try:
            # Claimed as long ago as a whole lease: past a third of it, renewed first.
            for job in (kept, lost):
                stream.todo.put(Call([job], registry.get("waited"), time.monotonic() - 30))
            ended = [stream.done.get(timeout=30), stream.done.get(timeout=30)]
        finally:
            stream.close()
    after = conn.execute("select lease_until from tickq.jobs where id = %s", (kept.id,)).fetchone()

    assert ran == [str(kept.id)]  # the lost one never ran
    assert sorted((len(e.jobs), e.dropped) for e in ended) == [(0, 1), (1, 0)]
    assert before is not None and after is not None and after[0] > before[0]
    assert all(isinstance(e, Ended) for e in ended)
