"""Connection faults under a real `tickq work` process: no handler runs twice because a
connection died, and work resumes the moment the database is back.

The handler (tests/faults/fault_tasks.py) logs every execution to a file of its own, so the
count of executions is not the engine's word for it. Sizes follow the environment:
TICKQ_FAULT_JOBS (default 10,000) and TICKQ_FAULT_OUTAGE_SECONDS (default 20; a
PostgreSQL restart in production may take 30 s or more).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from queue_core.model import validation
from queue_core.postgres import PostgresStore
from tests.chaos.harness import Database
from tests.conftest import Connect

ROOT = Path(__file__).resolve().parents[2]
APP_NAME = "tickq-fault-worker"
JOBS = int(os.environ.get("TICKQ_FAULT_JOBS", "10000"))
OUTAGE_SECONDS = float(os.environ.get("TICKQ_FAULT_OUTAGE_SECONDS", "20"))


@contextmanager
def worker_process(url: str, log: Path, tmp: Path, handler_seconds: float) -> Iterator[Path]:
    """`tickq work` on `url` with the counting handler; its stderr file is yielded. Its
    connections carry APP_NAME, so a test can find its backends. Stopped with SIGTERM."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PGAPPNAME": APP_NAME,
        "TICKQ_DATABASE_URL": url,
        "TICKQ_FAULT_LOG": str(log),
        "TICKQ_FAULT_HANDLER_SECONDS": str(handler_seconds),
    }
    command = [sys.executable, "-m", "tickq.infra.cli.program", "work", "--json", "--tasks"]
    command += ["tests.faults.fault_tasks", "--batch-size", "8", "--concurrency", "8"]
    command += ["--lease-seconds", "10", "--poll-interval", "1"]
    stderr = tmp / "worker.err"
    with stderr.open("wb") as err, (tmp / "worker.json").open("wb") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=err)
        try:
            yield stderr
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def executions(log: Path) -> Counter[str]:
    return Counter(log.read_text(encoding="utf-8").split()) if log.exists() else Counter()


def test_backends_terminated_twice_a_second_never_run_a_handler_twice(
    connect: Connect, database_url: str, tmp_path: Path
) -> None:
    admin = connect()
    store = PostgresStore(admin)
    for start in range(0, JOBS, 1000):
        store.enqueue_many(
            [validation.job_spec("count", {"n": n}) for n in range(start, min(JOBS, start + 1000))]
        )
    log = tmp_path / "executions.log"
    killed = 0
    stop = threading.Event()

    def terminate_the_workers_backends() -> None:
        nonlocal killed
        with psycopg.connect(database_url, autocommit=True) as killer:
            while not stop.wait(0.5):
                rows = killer.execute(
                    "select pg_terminate_backend(pid) from pg_stat_activity "
                    "where application_name = %s and pid <> pg_backend_pid()",
                    (APP_NAME,),
                ).fetchall()
                killed += sum(1 for (done,) in rows if done)

    def drained() -> bool:
        row = admin.execute(
            "select count(*) from tickq.jobs where status <> 'succeeded'"
        ).fetchone()
        return row == (0,)

    killer = threading.Thread(target=terminate_the_workers_backends, daemon=True)
    began = time.monotonic()
    with worker_process(database_url, log, tmp_path, 0.02) as stderr:
        wait_until(lambda: log.exists(), 60, "the worker's first job")
        killer.start()
        try:
            wait_until(drained, 480, f"{JOBS} jobs to succeed")
        finally:
            stop.set()
            killer.join(timeout=10)
    elapsed = time.monotonic() - began
    ran = executions(log)
    attempts = dict(
        admin.execute("select attempts, count(*) from tickq.jobs group by 1").fetchall()
    )
    reconnects = stderr.read_text(errors="replace").count("reconnected after")
    print(
        f"{JOBS} jobs in {elapsed:.1f} s, {killed} backends terminated, {reconnects} reconnects,"
        f" {sum(ran.values())} executions, attempts {attempts}"
    )
    assert killed >= 10, "too few terminations to prove anything: the drain was too quick"
    assert sum(ran.values()) == JOBS and len(ran) == JOBS, "a handler ran twice (or never)"
    assert attempts == {1: JOBS}, "a lost write cost a job an attempt"


def test_after_a_restart_the_worker_completes_a_job_within_two_seconds(tmp_path: Path) -> None:
    db = Database(tmp_path / "pgdata")
    db.start()
    try:
        db.create()
        log = tmp_path / "executions.log"
        with worker_process(db.url, log, tmp_path, 0.0):
            with psycopg.connect(db.url, autocommit=True) as conn:
                PostgresStore(conn).enqueue(validation.job_spec("count", {"n": "before"}))
                wait_until(lambda: len(executions(log)) == 1, 60, "the first job")
            db.stop()
            time.sleep(OUTAGE_SECONDS)
            db.start()
            while True:  # the moment the server accepts connections again
                try:
                    conn = psycopg.connect(db.url, autocommit=True, connect_timeout=1)
                    break
                except psycopg.OperationalError:
                    time.sleep(0.01)
            accepting = time.monotonic()
            with conn:
                job = PostgresStore(conn).enqueue(validation.job_spec("count", {"n": "after"}))

                def done() -> bool:
                    return PostgresStore(conn).get(job.id).status == "succeeded"

                wait_until(done, OUTAGE_SECONDS + 60, "a job after the restart")
            first_completion = time.monotonic() - accepting
    finally:
        db.stop()
    print(f"outage {OUTAGE_SECONDS:g} s: first completion {first_completion:.2f} s after accepting")
    assert first_completion < 2.0
