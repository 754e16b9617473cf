"""`tickq work` as a process: SIGTERM in the middle of a batch lets the batch finish and
persist, then the worker exits 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from queue_core.model.validation import job_spec
from queue_core.postgres import PostgresStore

ROOT = Path(__file__).resolve().parents[2]
SLOW_TASKS = """
import time
from queue_core import task

@task("slow")
def slow(job):
    time.sleep(1.5)
    return {"n": job.payload["n"]}
"""


def statuses(conn: psycopg.Connection) -> dict[str, int]:
    return dict(conn.execute("select status, count(*) from tickq.jobs group by 1").fetchall())


def test_sigterm_mid_batch_persists_the_batch_and_exits_cleanly(
    conn: psycopg.Connection, database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "slow_tasks.py").write_text(SLOW_TASKS)
    PostgresStore(conn).enqueue_many([job_spec("slow", {"n": n}) for n in range(4)])
    env = {
        **os.environ,
        "TICKQ_DATABASE_URL": database_url,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
    }
    command = [
        sys.executable,
        "-m",
        "tickq.infra.cli.program",
        "work",
        "--json",
        "--tasks",
        "slow_tasks",
    ]
    worker = subprocess.Popen(
        [*command, "--batch-size", "4", "--concurrency", "4"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while statuses(conn).get("running") != 4:  # the whole batch is in its handlers
            assert time.monotonic() < deadline and worker.poll() is None, "batch never started"
            time.sleep(0.05)
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()

    assert worker.returncode == 0, err.decode()
    assert statuses(conn) == {"succeeded": 4}
    assert json.loads(out)["succeeded"] == 4
