"""Transactional completion and batch consume with real worker processes (`tickq tick`,
`tickq work`): a worker SIGKILLed right after a handler's commit leaves its row once and
the job succeeded, never run again; killed before the commit, no row and the job retried;
a late worker whose lease expired and whose job another worker claimed cannot commit, and
its row is absent. 120 jobs through batch handler calls of at most 50."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest

from queue_core import PostgresStore, Registry, Status, enqueue

ROOT = Path(__file__).resolve().parents[2]
TASKS = "tests.e2e.handler_tasks"
INSTANT = {"base": 0.001, "max": 0.001}
LEASE = 1  # seconds: short, so the tests see leases expire


class Workers:
    """`tickq` commands in processes of their own, meeting the test in `marks`."""

    def __init__(self, url: str, marks: Path) -> None:
        self.marks = marks
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TICKQ_")}
        self.env.update(TICKQ_DATABASE_URL=url, TICKQ_HANDLER_MARKS=str(marks))

    def start(self, *args: str) -> subprocess.Popen[str]:
        command = [
            sys.executable,
            "-m",
            "tickq.infra.cli.program",
            "--json",
            *args,
            "--tasks",
            TASKS,
        ]
        return subprocess.Popen(
            command,
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, *args: str) -> Any:
        proc = self.start(*args)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"tickq {args} failed:\n{err[-2000:]}"
        return json.loads(out)

    def tickq(self, *args: str) -> Any:
        command = [sys.executable, "-m", "tickq.infra.cli.program", *args]
        done = subprocess.run(
            command, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    def wait_for(self, name: str, proc: subprocess.Popen[str]) -> None:
        ends = time.monotonic() + 60
        while not (self.marks / name).exists():
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < ends, f"no {name} within 60 s"
            time.sleep(0.02)


@pytest.fixture
def workers(database_url: str, tmp_path: Path) -> Workers:
    return Workers(database_url, tmp_path)


@pytest.fixture
def db(conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    conn.execute("create table if not exists public.charges (job_id uuid, attempt int)")
    conn.execute("truncate public.charges")
    yield conn


def new_job(conn: psycopg.Connection, type_: str, **options: Any) -> UUID:
    options.setdefault("lease_seconds", LEASE)
    options.setdefault("backoff_policy", INSTANT)
    return enqueue(conn, type_, using=Registry(), **options).id


def charges(conn: psycopg.Connection, job_id: UUID) -> list[int]:
    rows = conn.execute(
        "select attempt from public.charges where job_id = %s order by attempt", (job_id,)
    ).fetchall()
    return [attempt for (attempt,) in rows]


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)


def lease_expires(store: PostgresStore, job_id: UUID) -> None:
    ends = time.monotonic() + 30
    while (lease := store.get(job_id).lease_until) is not None and lease > store.now():
        assert time.monotonic() < ends
        time.sleep(0.05)


def tick_until_terminal(workers: Workers, store: PostgresStore, job_id: UUID) -> None:
    """Ticks after the job's lease expired, until it ends (one, unless the machine lags)."""
    lease_expires(store, job_id)
    for _ in range(5):
        workers.run("tick", "--batch-size", "10")
        if store.get(job_id).is_terminal:
            return
    raise AssertionError(store.get(job_id))


def test_a_worker_killed_right_after_the_commit_leaves_one_row_and_a_job_never_run_again(
    workers: Workers, db: psycopg.Connection
) -> None:
    store = PostgresStore(db)
    charged = new_job(db, "e2e-charge", priority=10)
    slow = new_job(db, "e2e-slow")
    # One claim of both, run one after the other: the slow job keeps the worker alive
    # after the charge's commit, until the kill.
    proc = workers.start("tick", "--batch-size", "2", "--concurrency", "1")
    workers.wait_for(f"{slow}.inside", proc)
    kill(proc)

    job = store.get(charged)
    assert (job.status, job.attempts, job.result) == (Status.SUCCEEDED, 1, {"attempt": 1})
    assert charges(db, charged) == [1]
    tick_until_terminal(workers, store, slow)  # the slow job's lease expires; it runs again

    assert store.get(slow).attempts == 2
    job = store.get(charged)
    assert (job.status, job.attempts) == (Status.SUCCEEDED, 1)
    assert charges(db, charged) == [1]
    shown = json.loads(workers.tickq("--json", "show", str(charged)))
    assert shown["completed_in_transaction"] is True


def held_charge(workers: Workers, db: psycopg.Connection) -> tuple[UUID, subprocess.Popen[str]]:
    """A charge job whose first attempt holds its transaction open (row inserted, not
    committed) in a `tickq tick` process, once the handler got there."""
    job_id = new_job(db, "e2e-charge", payload={"hold": True})
    proc = workers.start("tick")
    workers.wait_for(f"{job_id}.inside", proc)
    return job_id, proc


def test_a_worker_killed_before_the_commit_leaves_no_row_and_the_job_retries(
    workers: Workers, db: psycopg.Connection
) -> None:
    store = PostgresStore(db)
    job_id, proc = held_charge(workers, db)
    kill(proc)

    assert charges(db, job_id) == []
    assert store.get(job_id).status == Status.RUNNING
    tick_until_terminal(workers, store, job_id)

    job = store.get(job_id)
    assert (job.status, job.attempts, job.result) == (Status.SUCCEEDED, 2, {"attempt": 2})
    assert job.errors[0]["error"] == "lease expired"
    assert charges(db, job_id) == [2]


def test_a_late_worker_whose_job_was_claimed_again_cannot_commit_its_row(
    workers: Workers, db: psycopg.Connection
) -> None:
    store = PostgresStore(db)
    job_id, late = held_charge(workers, db)
    lease_expires(store, job_id)

    second = workers.run("tick")  # reclaims the expired lease and runs attempt 2
    (workers.marks / f"{job_id}.go").touch()  # the late worker's handler returns now
    out, err = late.communicate(timeout=60)

    assert late.returncode == 0, err[-2000:]
    first = json.loads(out)
    assert (first["succeeded"], first["lost_leases"]) == (0, 1)
    assert (second["reclaimed"], second["succeeded"]) == (1, 1)
    job = store.get(job_id)
    assert (job.status, job.attempts, job.result) == (Status.SUCCEEDED, 2, {"attempt": 2})
    assert charges(db, job_id) == [2]


@pytest.mark.parametrize(
    "how",
    # Ticks run the same in-process in tests/integration/test_handler_batches.py.
    [pytest.param("tick", marks=pytest.mark.slow), "work"],
)
def test_120_jobs_go_through_batch_calls_of_at_most_50_and_one_failure_retries_alone(
    workers: Workers, db: psycopg.Connection, how: str
) -> None:
    store = PostgresStore(db)
    ids = [new_job(db, "e2e-embed", payload={"n": n}) for n in range(120)]

    ends = time.monotonic() + 120
    while not all(store.get(i).is_terminal for i in ids):
        assert time.monotonic() < ends
        if how == "tick":
            workers.run("tick", "--batch-size", "100")
        else:
            workers.run("work", "--batch-size", "100", "--until-empty", "--poll-interval", "0.1")

    calls = [json.loads(line) for line in (workers.marks / "calls.jsonl").read_text().splitlines()]
    assert max(len(call) for call in calls) == 50
    assert sorted(n for call in calls for n in call) == sorted([*range(120), 77])
    assert [call for call in calls if 77 in call][-1] == [77]
    jobs = [store.get(i) for i in ids]
    assert [j.result for j in jobs] == [{"doubled": n * 2} for n in range(120)]
    assert [n for n, j in enumerate(jobs) if j.attempts != 1] == [77]
    shown = json.loads(workers.tickq("--json", "show", str(ids[0])))
    assert shown["batch_id"] is not None
