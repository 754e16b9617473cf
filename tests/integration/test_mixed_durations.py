"""Jobs of mixed durations (1 ms to 5 s, the long ones heartbeating) on two `tickq work`
processes and ticks started beside them, with short leases: every job runs once, and each
outcome is saved soon after its handler ends, whatever its batch-mates do.

The handler records when it ended (clock_timestamp, on its own connection); the job row
says when its outcome was saved (finished_at). The delay between the two is printed (p50,
p99, max) and must stay below the lease: an ended job's outcome is saved before its lease
could run down, so no other worker reclaims it and runs it again.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from queue_core import PostgresStore
from queue_core.model.validation import job_spec

ROOT = Path(__file__).resolve().parents[2]
LEASE = 3
TASKS = f"""
import os, threading, time
import psycopg
from queue_core import task

_local = threading.local()


def _conn():
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = _local.conn = psycopg.connect(os.environ["TICKQ_DATABASE_URL"], autocommit=True)
    return conn


@task("mixed", lease_seconds={LEASE}, max_attempts=3)
def mixed(job):
    deadline = time.monotonic() + job.payload["ms"] / 1000
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.25))
        if time.monotonic() < deadline:
            job.heartbeat()
    _conn().execute(
        "insert into mixed_runs (job_id, attempt, pid, ended_at)"
        " values (%s, %s, %s, clock_timestamp())",
        (job.id, job.attempt, os.getpid()),
    )
"""


def durations(rng: random.Random) -> list[int]:
    """Milliseconds: a few long jobs first (so that they share claims with quick ones),
    then mostly 1 ms jobs with some of 50-300 ms and of about a second."""
    mix = [5000, 5000, 3000, 3000]
    for _ in range(400):
        roll = rng.random()
        mix.append(1 if roll < 0.85 else rng.randint(50, 300) if roll < 0.97 else 1000)
    return mix


def test_mixed_durations_run_once_and_are_saved_soon_after_they_end(
    conn: psycopg.Connection, database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "mixed_tasks.py").write_text(TASKS)
    conn.execute(
        "create table mixed_runs (job_id uuid, attempt int, pid int, ended_at timestamptz)"
    )
    planned = durations(random.Random(7))
    PostgresStore(conn).enqueue_many([job_spec("mixed", {"ms": ms}) for ms in planned])
    env = {
        **os.environ,
        "TICKQ_DATABASE_URL": database_url,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
    }
    tickq = [sys.executable, "-m", "tickq.infra.cli.program"]
    common = ["--tasks", "mixed_tasks", "--concurrency", "4", "--batch-size", "4"]
    workers = [
        subprocess.Popen(
            [*tickq, "work", *common, "--max-seconds", "90"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        for _ in range(2)
    ]
    ticks: list[subprocess.Popen[bytes]] = []
    last_tick = 0.0
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            left = conn.execute(
                "select count(*) from tickq.jobs where status not in ('succeeded', 'dead')"
            ).fetchone()
            if left == (0,):
                break
            ticks = [t for t in ticks if t.poll() is None]
            if len(ticks) < 2 and time.monotonic() - last_tick > 2:
                # ticks come and go beside the workers
                tick = [*tickq, "tick", *common]
                ticks.append(subprocess.Popen(tick, cwd=ROOT, env=env, stdout=subprocess.DEVNULL))
                last_tick = time.monotonic()
            time.sleep(0.2)
    finally:
        for process in workers + ticks:
            process.terminate()
        for process in workers + ticks:
            process.wait(30)

    statuses = conn.execute(
        "select status, attempts, count(*) from tickq.jobs group by 1, 2"
    ).fetchall()
    assert statuses == [("succeeded", 1, len(planned))]
    runs = conn.execute("select count(*), count(distinct job_id) from mixed_runs").fetchone()
    assert runs == (len(planned), len(planned)), "a job ran more than once"
    delays = conn.execute(
        """
        select percentile_cont(0.5) within group (order by d),
               percentile_cont(0.99) within group (order by d),
               max(d)
        from (select extract(epoch from j.finished_at - r.ended_at)::float8 as d
              from tickq.jobs j join mixed_runs r on r.job_id = j.id) delays
        """
    ).fetchone()
    assert delays is not None
    p50, p99, worst = delays
    print(f"handler end to outcome saved: p50 {p50:.3f} s, p99 {p99:.3f} s, max {worst:.3f} s")
    assert worst < LEASE, f"an outcome waited {worst:.3f} s, past its {LEASE} s lease"
