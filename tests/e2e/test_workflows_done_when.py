"""The durable-workflows "done when", through separate `tickq tick` processes: a parent
maps 200 children with at most 20 runnable at once and resumes once with their results in
order; a three-step saga whose third step fails permanently undoes step 2, then step 1,
once each, though a SIGKILL ends the tick in the middle of its compensation; a step with
its own retry fails twice, then succeeds, and the job spends one attempt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest

from queue_core import PostgresStore, Registry, Status, enqueue

ROOT = Path(__file__).resolve().parents[2]
TASKS = "tests.e2e.workflow_tasks"


class Ticks:
    """Runs `tickq` in processes of its own, on the test's database."""

    def __init__(self, url: str, runs: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TICKQ_")}
        self.env.update(TICKQ_DATABASE_URL=url, TICKQ_STEP_RUNS=str(runs))
        self.runs = runs

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "tickq.infra.cli.program", "--json", *args]
        return subprocess.run(
            command, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120
        )

    def tickq(self, *args: str) -> Any:
        done = self.run(*args)
        assert done.returncode == 0, f"tickq {args} failed:\n{done.stderr[-2000:]}"
        return json.loads(done.stdout)

    def tick(self) -> subprocess.CompletedProcess[str]:
        return self.run("tick", "--tasks", TASKS, "--max-seconds", "20")

    def effects(self, job_id: UUID | None = None) -> Counter[str]:
        lines = self.runs.read_text().splitlines() if self.runs.exists() else []
        pairs = (line.partition(" ") for line in lines)
        return Counter(what for id_, _, what in pairs if job_id is None or id_ == str(job_id))


@pytest.fixture
def ticks(database_url: str, tmp_path: Path) -> Ticks:
    return Ticks(database_url, tmp_path / "runs.txt")


def tick_until_terminal(ticks: Ticks, store: PostgresStore, job_id: UUID, most: int) -> int:
    """Tick until the job has ended; a tick that died (SIGKILL) is followed, once its lease
    has run out, by the next. Returns how many ticks ran."""
    for count in range(1, most + 1):
        done = ticks.tick()
        if done.returncode != 0:
            wait_for_expired_leases(store)
        if store.get(job_id).is_terminal:
            return count
    raise AssertionError(f"job {job_id} did not end in {most} ticks: {store.get(job_id)}")


def wait_for_expired_leases(store: PostgresStore) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        running = store.list_jobs(statuses=[Status.RUNNING]).jobs
        ends = [j.lease_until for j in running if j.lease_until]
        if not ends or max(ends) <= store.now():
            return
        time.sleep(0.05)
    raise AssertionError("leases did not run out")


def test_a_parent_maps_200_children_20_at_a_time_and_resumes_once_with_their_results(
    ticks: Ticks, conn: psycopg.Connection
) -> None:
    store = PostgresStore(conn)
    parent = enqueue(conn, "wf-fan-out", {"n": 200, "window": 20}, using=Registry()).id

    tick_until_terminal(ticks, store, parent, most=20)

    job = store.get(parent)
    assert (job.status, job.attempts) == (Status.SUCCEEDED, 1), job
    assert job.result == {"results": [2 * i for i in range(200)]}
    assert ticks.effects(parent) == Counter({"resumed with results": 1})
    shown = ticks.tickq("show", str(parent))
    assert shown["resumes"] == 1
    assert len(shown["spawned"]) == 200
    assert shown["maps"] == [{"step": "chunks", "children": 200, "max_running": 20, "ended": 200}]
    children = conn.execute(
        "select status, count(*) from tickq.jobs where type = 'wf-chunk' group by status"
    ).fetchall()
    assert children == [("succeeded", 200)]  # each enqueued once
    runnable = [int(what.split()[1]) for what in ticks.effects() if what.startswith("runnable")]
    counts = Counter(
        int(what.split()[1]) for what in ticks.effects().elements() if what.startswith("runnable")
    )
    assert sum(counts.values()) == 200, counts  # every child ran once
    assert max(runnable) <= 20, counts
    child = shown["spawned"][0]["id"]
    assert ticks.tickq("show", child)["spawned_by"][0]["id"] == str(parent)


def test_a_saga_undoes_its_completed_steps_in_reverse_once_each_across_a_sigkill(
    ticks: Ticks, conn: psycopg.Connection
) -> None:
    store = PostgresStore(conn)
    saga = enqueue(conn, "wf-saga", lease_seconds=2, max_attempts=2, using=Registry()).id

    count = tick_until_terminal(ticks, store, saga, most=10)

    job = store.get(saga)
    assert job.status == Status.DEAD, job
    assert job.error == "PermanentError: the carrier refused the parcel"
    assert count >= 2  # the first tick died in the refund
    assert ticks.effects(saga) == Counter(
        {"charge": 1, "reserve": 1, "ship failed": 1, "undo reserve": 1, "undo charge": 1}
    )
    lines = [w for w in ticks.runs.read_text().split("\n") if w.startswith(str(saga))]
    assert lines[-2:] == [f"{saga} undo reserve", f"{saga} undo charge"]
    shown = ticks.tickq("show", str(saga))
    assert [(u["name"], u["tries"], u["undone_at"] is not None) for u in shown["undone"]] == [
        ("reserve", 1, True),
        ("charge", 2, True),
    ]
    assert shown["compensation"]["ends"] == "dead"

    # Replay from the step that failed: it and the later ones are forgotten, and so are the
    # steps the compensation undid; nothing is left to compensate.
    (retried,) = ticks.tickq("retry", str(saga), "--from-step", "reserve")
    assert retried["status"] == "queued"
    shown = ticks.tickq("show", str(saga))
    assert (shown["steps"], shown["undone"], shown["compensation"]) == ([], [], None)


def test_a_step_that_fails_twice_then_succeeds_retries_alone_and_spends_one_attempt(
    ticks: Ticks, conn: psycopg.Connection
) -> None:
    store = PostgresStore(conn)
    flaky = enqueue(conn, "wf-flaky-step", using=Registry()).id

    for _ in range(10):
        ticks.tick()
        if store.get(flaky).is_terminal:
            break
        wait_until_runnable(store, flaky)

    job = store.get(flaky)
    assert (job.status, job.attempts, job.result) == (Status.SUCCEEDED, 1, "call"), job
    assert ticks.effects(flaky) == Counter({"call failed": 2, "call": 1})
    shown = ticks.tickq("show", str(flaky))
    assert [(s["name"], s["tries"]) for s in shown["steps"]] == [("call", 3)]
    assert shown["resumes"] == 2


def wait_until_runnable(store: PostgresStore, job_id: UUID) -> None:
    wake = store.get(job_id).run_after
    while store.now() < wake:
        time.sleep(0.02)
