"""The issue's "done when" for dependencies, literally: only `tickq enqueue` and `tickq tick`
drive the jobs, each a process of its own; `tickq show` and `tickq jobs` read the outcome."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TICKQ = Path(sys.executable).with_name("tickq")
UNKNOWN = "0190c0de-0000-7000-8000-0000000000ff"


@pytest.fixture
def tickq(database_url: str, clean_tables: None) -> Any:
    env = {
        **os.environ,
        "TICKQ_DATABASE_URL": database_url,
        "TICKQ_TASK_MODULES": "tests.e2e.pipeline_tasks",
        "PYTHONPATH": str(ROOT),
    }

    def run(*argv: str, expect: int = 0) -> Any:
        done = subprocess.run(
            [str(TICKQ), *argv, "--json"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == expect, (argv, done.stdout, done.stderr)
        return json.loads(done.stdout) if expect == 0 else done.stdout + done.stderr

    return run


def test_b_after_a_waits_then_runs_with_as_result(tickq: Any) -> None:
    a = tickq("enqueue", "extract", "--payload", '{"doc": 7}')["id"]
    b = tickq("enqueue", "collect", "--after", a)
    assert b["status"] == "waiting"

    report = tickq("tick")

    assert report["succeeded"] == 2
    shown = tickq("show", b["id"])
    assert shown["status"] == "succeeded"
    assert shown["result"] == {"parents": {a: {"doc": 7, "chunks": 3}}}
    assert shown["after"] == [{"id": a, "type": "extract", "status": "succeeded"}]
    assert tickq("show", a)["children"] == [
        {"id": b["id"], "type": "collect", "status": "succeeded"}
    ]


def test_a_child_after_three_parents_runs_exactly_once_after_the_last(tickq: Any) -> None:
    parents = [tickq("enqueue", "extract", "--payload", f'{{"doc": {n}}}')["id"] for n in range(3)]
    child = tickq("enqueue", "collect", *(arg for p in parents for arg in ("--after", p)))["id"]

    for finished in range(1, 3):
        tickq("tick", "--batch-size", "1", "--max-batches", "1")
        assert tickq("show", child)["status"] == "waiting", f"after {finished} parents"
    tickq("tick", "--batch-size", "1", "--max-batches", "1")
    assert tickq("show", child)["status"] == "queued"
    assert tickq("tick")["succeeded"] == 1

    shown = tickq("show", child)
    assert shown["status"] == "succeeded" and shown["attempts"] == 1
    assert set(shown["result"]["parents"]) == set(parents)
    assert tickq("tick")["claimed"] == 0


def test_a_parent_that_fails_permanently_cancels_child_and_grandchild(tickq: Any) -> None:
    a = tickq("enqueue", "explode")["id"]
    child = tickq("enqueue", "collect", "--after", a)["id"]
    grandchild = tickq("enqueue", "collect", "--after", child)["id"]

    report = tickq("tick")

    assert report["dead"] == 1 and report["claimed"] == 1
    for job_id in (child, grandchild):
        shown = tickq("show", job_id)
        assert shown["status"] == "cancelled"
        assert shown["error"] == f"parent {a} is dead"
        assert shown["attempts"] == 0 and shown["started_at"] is None  # never ran
    assert tickq("jobs", "--status", "waiting")["jobs"] == []


def test_after_an_unknown_id_is_refused_with_nothing_written(tickq: Any) -> None:
    message = tickq("enqueue", "collect", "--after", UNKNOWN, expect=2)

    assert f"job {UNKNOWN} not found" in message
    assert tickq("jobs")["jobs"] == []


def test_waiting_jobs_are_listed_by_status(tickq: Any) -> None:
    a = tickq("enqueue", "extract")["id"]
    b = tickq("enqueue", "collect", "--after", a)["id"]

    assert [j["id"] for j in tickq("jobs", "--status", "waiting")["jobs"]] == [b]
