"""The issue's "done when", literally, with real `tickq` processes against PostgreSQL.

1. After `tickq enqueue acc --count 3000 --group big` and five `--group small` jobs, one
   `tickq tick --batch-size 10` starts all five small jobs within its first two batches.
2. With `--max-running-per-group 2` on a type, three concurrent `tickq tick` processes never
   run more than two jobs of one group at once (sampled continuously from another
   connection), and all jobs finish.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
TICKQ = str(Path(sys.executable).parent / "tickq")


@pytest.fixture
def tickq(database_url: str, clean_tables: None):
    env = {
        **os.environ,
        "TICKQ_DATABASE_URL": database_url,
        "TICKQ_TASK_MODULES": "tests.e2e.fair_tasks",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("TICKQ_QUEUES", None)

    def run(*argv: str) -> Any:
        done = subprocess.run(
            [TICKQ, *argv, "--json"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"tickq {' '.join(argv)}: {done.stderr}"
        return json.loads(done.stdout)

    return run


def test_one_tick_starts_the_small_groups_jobs_within_its_first_two_batches(tickq, conn):
    tickq("enqueue", "acc", "--count", "3000", "--group", "big")
    tickq("enqueue", "acc", "--count", "5", "--group", "small")
    report = tickq("tick", "--batch-size", "10")
    assert report["succeeded"] == 3005
    # Batches are claimed one after another, so the first two batches are the 20 jobs
    # started first.
    started_up_to_last_small = conn.execute(
        "select count(*) from tickq.jobs where started_at <= "
        "(select max(started_at) from tickq.jobs where group_key = 'small')"
    ).fetchone()[0]
    assert started_up_to_last_small <= 20


def busiest_group(monitor: psycopg.Connection) -> int:
    row = monitor.execute(
        "select coalesce(max(n), 0) from (select count(*) as n from tickq.jobs"
        " where status = 'running' group by group_key) g"
    ).fetchone()
    return int(row[0])


def test_three_ticks_never_run_more_than_two_jobs_of_one_group(tickq, conn, database_url):
    tickq("limits", "set", "--type", "acc", "--max-running-per-group", "2")
    for group in ("g1", "g2", "g3"):
        tickq("enqueue", "acc", "--count", "12", "--group", group, "--payload", '{"sleep": 0.05}')
    stop = threading.Event()
    seen: list[int] = []
    failures: list[str] = []

    def watch() -> None:
        with psycopg.connect(database_url, autocommit=True) as monitor:
            while not stop.is_set():
                seen.append(busiest_group(monitor))

    def work(batch: int) -> None:
        # A tick ends when its claim finds nothing it may take; ticks run until all is done.
        # Batch sizes differ, so a claim reaches past the rows another one has locked.
        give_up = time.monotonic() + 120
        with psycopg.connect(database_url, autocommit=True) as mine:
            while time.monotonic() < give_up:
                left = mine.execute(
                    "select count(*) from tickq.jobs where status <> 'succeeded'"
                ).fetchone()[0]
                if not left:
                    return
                try:
                    tickq("tick", "--batch-size", str(batch), "--concurrency", "4")
                except AssertionError as exc:
                    failures.append(str(exc))
                    return

    watcher = threading.Thread(target=watch)
    workers = [threading.Thread(target=work, args=(batch,)) for batch in (1, 3, 4)]
    watcher.start()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=180)
    stop.set()
    watcher.join()

    assert not failures
    done = conn.execute("select count(*) from tickq.jobs where status = 'succeeded'").fetchone()
    assert done[0] == 36
    assert len(seen) > 100
    assert max(seen) <= 2, f"a group ran {max(seen)} jobs at once, over its cap of 2"
    assert max(seen) == 2  # the cap was reached: the processes did race
