"""`tickq work` as a process whose plain handlers hang past their timeout: once the threads
it abandoned pass TICKQ_MAX_ABANDONED_HANDLERS it claims no more, lets the jobs it holds
finish and persist, and starts afresh in place (the same command in the same process, rid
of the threads Python cannot stop), or, with --exit-on-abandoned, exits with code 75
(EX_TEMPFAIL) for its supervisor to start it again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg

from queue_core.model.validation import job_spec
from queue_core.postgres import PostgresStore

ROOT = Path(__file__).resolve().parents[2]
HANGING_TASKS = """
import time
from queue_core import task

@task("hang", timeout=1, max_attempts=1)
def hang(job):
    time.sleep(120)  # far past the timeout, and past the test's patience

@task("slow")
def slow(job):
    time.sleep(2)  # outlives its batch-mates' timeout: it must still be saved
    return "slow"

@task("quick")
def quick(job):
    return "quick"
"""


def outcomes(conn: psycopg.Connection) -> list[tuple[str, str, str | None]]:
    return conn.execute(
        "select type, status, error from tickq.jobs order by type, status"
    ).fetchall()


def start_hanging_jobs(
    conn: psycopg.Connection, database_url: str, tmp_path: Path
) -> dict[str, str]:
    """Two jobs that hang past their timeout and a slow one in the first batch, quick jobs
    behind; the environment of a worker whose bound is one abandoned thread."""
    (tmp_path / "hanging_tasks.py").write_text(HANGING_TASKS)
    store = PostgresStore(conn)
    # One batch of two hanging jobs and a slow one (ranked first), then quick jobs behind.
    store.enqueue_many(
        [job_spec(t, {}, priority=5, max_attempts=1) for t in ("hang", "hang", "slow")]
    )
    store.enqueue_many([job_spec("quick", {}) for _ in range(3)])
    env = {
        **os.environ,
        "TICKQ_DATABASE_URL": database_url,
        "TICKQ_MAX_ABANDONED_HANDLERS": "1",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
    }
    return env


def documents(text: str) -> list[dict]:
    """The JSON documents printed one after another (one per run of the command)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (at := len(text) - len(text[at:].lstrip())) < len(text):
        value, at = decoder.raw_decode(text, at)
        found.append(value)
    return found


COMMAND = [sys.executable, "-m", "tickq.infra.cli.program", "work", "--json", "--until-empty"]
OPTIONS = ["--tasks", "hanging_tasks", "--batch-size", "3", "--concurrency", "3"]


def test_a_worker_past_its_abandoned_bound_saves_what_it_holds_and_exits_to_restart(
    conn: psycopg.Connection, database_url: str, tmp_path: Path
) -> None:
    env = start_hanging_jobs(conn, database_url, tmp_path)
    worker = subprocess.run(
        [*COMMAND, *OPTIONS, "--exit-on-abandoned"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=60,  # the hung handlers sleep 120 s: the worker does not wait for them
    )

    assert worker.returncode == 75, worker.stderr.decode()
    assert "exiting with code 75 to be started afresh" in worker.stderr.decode()
    report = json.loads(worker.stdout)
    assert report["abandoned_past_bound"] is True and report["abandoned_handlers"] == 2
    # Everything claimed was saved. A quick job may have taken the slot of the first hung
    # handler before the second passed the bound (they time out together, in any order).
    assert report["timed_out"] == 2 and report["succeeded"] >= 1
    assert report["claimed"] == report["timed_out"] + report["succeeded"]
    quick_run = report["succeeded"] - 1
    assert outcomes(conn) == [
        ("hang", "dead", "timed out after 1 s (abandoned)"),
        ("hang", "dead", "timed out after 1 s (abandoned)"),
        *[("quick", "queued", None)] * (3 - quick_run),
        *[("quick", "succeeded", None)] * quick_run,
        ("slow", "succeeded", None),
    ]


def test_a_worker_past_its_abandoned_bound_starts_afresh_in_place_and_goes_on(
    conn: psycopg.Connection, database_url: str, tmp_path: Path
) -> None:
    env = start_hanging_jobs(conn, database_url, tmp_path)
    worker = subprocess.run(
        [*COMMAND, *OPTIONS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=60,  # the hung handlers sleep 120 s: the restart is rid of them
    )

    stderr = worker.stderr.decode()
    assert worker.returncode == 0, stderr
    assert stderr.count("starting afresh in place") == 1
    first, second = documents(worker.stdout.decode())
    assert first["abandoned_past_bound"] is True and first["succeeded"] >= 1
    assert second["abandoned_past_bound"] is False
    assert first["succeeded"] + second["succeeded"] == 4
    assert outcomes(conn) == [
        ("hang", "dead", "timed out after 1 s (abandoned)"),
        ("hang", "dead", "timed out after 1 s (abandoned)"),
        ("quick", "succeeded", None),
        ("quick", "succeeded", None),
        ("quick", "succeeded", None),
        ("slow", "succeeded", None),
    ]
