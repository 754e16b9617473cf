"""The durable-steps issue's "done when", literally: separate `tickq tick --max-seconds 1.5`
processes (and `tickq invoke TickFunction` with the same 1.5 s budget) run step-structured
jobs across ticks; each step's fn runs exactly once, sleeps and waits keep the job off the
workers, and `tickq signal` wakes a waiting job with its payload."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest

from queue_core import PostgresStore, Registry, Status, enqueue

ROOT = Path(__file__).resolve().parents[2]
TASKS = "tests.e2e.step_tasks"
# TickFunction's template timeout is 120 s: a margin of 118.5 s leaves 1.5 s, and the lease
# must outlast timeout plus margin.
INVOKE_ENV = (
    "TICKQ_SAFETY_MARGIN_MS=118500",
    "TICKQ_LEASE_SECONDS=300",
    f"TICKQ_TASK_MODULES={TASKS}",
)


class Ticks:
    """Runs one tick in its own process, the CLI's way or the Lambda handler's way."""

    def __init__(self, how: str, url: str, runs: Path) -> None:
        self.how = how
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TICKQ_")}
        self.env.update(TICKQ_DATABASE_URL=url, TICKQ_STEP_RUNS=str(runs))

    def tickq(self, *args: str) -> Any:
        command = [sys.executable, "-m", "tickq.infra.cli.program", "--json", *args]
        done = subprocess.run(
            command, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{command} failed:\n{done.stderr[-2000:]}"
        return json.loads(done.stdout)

    def tick(self) -> dict[str, Any]:
        if self.how == "tick":
            report: dict[str, Any] = self.tickq("tick", "--tasks", TASKS, "--max-seconds", "1.5")
            return report
        args = ["invoke", "TickFunction", "--event", "infra/events/tick.json"]
        for pair in INVOKE_ENV:
            args += ["--env", pair]
        report = self.tickq(*args)
        return report


@pytest.fixture(params=["tick", "invoke"])
def ticks(request: pytest.FixtureRequest, database_url: str, tmp_path: Path) -> Ticks:
    return Ticks(request.param, database_url, tmp_path / "runs.txt")


def new_job(conn: psycopg.Connection, type_: str) -> UUID:
    return enqueue(conn, type_, using=Registry()).id


def runs(ticks: Ticks, job_id: UUID) -> Counter[str]:
    path = Path(ticks.env["TICKQ_STEP_RUNS"])
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(
        name for id_, _, name in (line.partition(" ") for line in lines) if id_ == str(job_id)
    )


def wait_until_runnable(store: PostgresStore, job_id: UUID) -> None:
    wake = store.get(job_id).run_after
    while store.now() < wake:
        time.sleep(0.05)


def test_a_six_step_job_crosses_ticks_running_each_step_once(
    ticks: Ticks, conn: psycopg.Connection
) -> None:
    store = PostgresStore(conn)
    job_id = new_job(conn, "e2e-six-steps")

    count = 0
    while not store.get(job_id).is_terminal and count < 12:
        ticks.tick()
        count += 1

    job = store.get(job_id)
    assert (job.status, job.attempts) == (Status.SUCCEEDED, 1), job
    assert job.result == {"parts": [f"part:{i}" for i in range(6)]}
    assert runs(ticks, job_id) == Counter(f"part:{i}" for i in range(6))
    assert count >= 3, f"6 steps of 0.5 s with 1.5 s per tick took only {count} ticks"
    shown = ticks.tickq("show", str(job_id))
    assert [s["name"] for s in shown["steps"]] == [f"part:{i}" for i in range(6)]
    # Each tick but the last suspends the job at least once. A tick with time left after a
    # suspension may claim it again (its run_after is now), and a claim always stores one
    # step before it may suspend, so there are at most five suspensions for six steps.
    assert count - 1 <= shown["resumes"] <= 5, (count, shown["resumes"])


def test_a_failed_second_step_reruns_only_that_step(ticks: Ticks, conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    job_id = new_job(conn, "e2e-flaky-second")

    # Two ticks suffice on a quiet machine; a loaded one may need more (a tick that starts
    # late has less than a step's time left and suspends the job), so tick until it ends.
    for _ in range(12):
        if store.get(job_id).is_terminal:
            break
        ticks.tick()

    job = store.get(job_id)
    assert (job.status, job.result, job.attempts) == (Status.SUCCEEDED, ["first", "second"], 2)
    assert runs(ticks, job_id) == Counter({"first": 1, "second failed": 1, "second": 1})


def test_a_sleeping_job_is_off_the_workers_until_it_wakes(
    ticks: Ticks, conn: psycopg.Connection
) -> None:
    store = PostgresStore(conn)
    job_id = new_job(conn, "e2e-nap")

    assert ticks.tick()["suspended"] == 1
    asleep = store.get(job_id)
    assert asleep.status == Status.QUEUED and asleep.lease_token is None
    assert asleep.run_after - asleep.updated_at == timedelta(seconds=2)
    assert ticks.tickq("show", str(job_id))["waiting_for"]["name"] == "nap"
    report = ticks.tick()
    if report["claimed"] == 0:  # a tick inside the 2 s: the job stays asleep
        assert store.get(job_id).status == Status.QUEUED
        wait_until_runnable(store, job_id)
        report = ticks.tick()

    job = store.get(job_id)
    assert report["resumed"] == 1 and job.status == Status.SUCCEEDED and job.attempts == 1
    assert job.started_at is not None and job.started_at >= asleep.run_after  # never before
    assert runs(ticks, job_id) == Counter({"after nap": 1})


def test_a_waiting_job_completes_on_the_tick_after_its_signal(
    ticks: Ticks, conn: psycopg.Connection
) -> None:
    store = PostgresStore(conn)
    job_id = new_job(conn, "e2e-approval")

    ticks.tick()
    assert ticks.tick()["claimed"] == 0
    waiting = ticks.tickq("show", str(job_id))
    assert waiting["status"] == "queued" and waiting["waiting_for"]["name"] == "approve"

    sent = ticks.tickq("signal", str(job_id), "approve", "--payload", '{"ok": true}')
    assert sent["woke"] is True
    ticks.tick()

    job = store.get(job_id)
    assert (job.status, job.result, job.attempts) == (Status.SUCCEEDED, {"ok": True}, 1)
