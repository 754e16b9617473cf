"""The safe-deploys issue's "done when": two versions of one job type in one database, run by
separate `tickq` processes. Version 1 suspends jobs; `tickq deploy check` (on the worker
login) names every one of them for an unsafe version 2 and exits 1, passes a version 2 that
wraps its change in job.patched, after which old and new jobs end with their own steps;
pinned workers of two versions each drain their own version's jobs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest

from queue_core import PostgresStore, Registry, Status, enqueue

ROOT = Path(__file__).resolve().parents[2]
V1 = "tests.e2e.deploy_v1"
V2_UNSAFE = "tests.e2e.deploy_v2_unsafe"
V2_PATCHED = "tests.e2e.deploy_v2_patched"


class Tickq:
    """Runs `tickq` in its own process with the code of one version."""

    def __init__(self, url: str, runs: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TICKQ_")}
        self.env.update(TICKQ_DATABASE_URL=url, TICKQ_STEP_RUNS=str(runs))
        self.runs = runs

    def run(
        self, *args: str, url: str | None = None, json_out: bool = True, **env: str
    ) -> tuple[int, Any, str]:
        command = [
            sys.executable,
            "-m",
            "tickq.infra.cli.program",
            *(["--json"] if json_out else []),
            *args,
        ]
        environment = {**self.env, **env}
        if url is not None:
            environment["TICKQ_DATABASE_URL"] = url
        done = subprocess.run(
            command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
        )
        data = (
            done.stdout
            if not json_out
            else json.loads(done.stdout)
            if done.stdout.strip()
            else None
        )
        return done.returncode, data, done.stderr

    def tick(self, tasks: str, version: str, *, pinned: bool = False) -> dict[str, Any]:
        env = {"TICKQ_CODE_VERSION": version, "TICKQ_PIN_VERSION": "on" if pinned else "off"}
        code, report, err = self.run("tick", "--tasks", tasks, **env)
        assert code == 0, err[-2000:]
        assert isinstance(report, dict)
        return report

    def ran(self, job_id: UUID) -> Counter[str]:
        lines = self.runs.read_text().splitlines() if self.runs.exists() else []
        parts = (line.partition(" ") for line in lines)
        return Counter(name for id_, _, name in parts if id_ == str(job_id))


@pytest.fixture
def tickq(database_url: str, tmp_path: Path) -> Tickq:
    return Tickq(database_url, tmp_path / "runs.txt")


def new_jobs(conn: psycopg.Connection, n: int) -> list[UUID]:
    return [enqueue(conn, "e2e-deploy", {}, using=Registry()).id for _ in range(n)]


def approve(store: PostgresStore, jobs: list[UUID]) -> None:
    for job_id in jobs:
        store.steps.signal(job_id, "approve", True)


def step_names(store: PostgresStore, job_id: UUID) -> list[str]:
    return [s["name"] for s in store.steps.show(job_id).steps]


def test_the_check_names_an_unsafe_version_and_passes_a_patched_one_that_then_runs(
    tickq: Tickq, conn: psycopg.Connection, worker_login_url: str
) -> None:
    store = PostgresStore(conn)
    # Given two jobs suspended under version 1 (fetched, waiting for approval)
    old = new_jobs(conn, 2)
    tickq.tick(V1, "v1")
    assert all(store.steps.show(j).wait is not None for j in old)

    # When the unsafe version 2 is checked, on the worker login
    code, found, _ = tickq.run("deploy", "check", "--tasks", V2_UNSAFE, url=worker_login_url)

    # Then it exits 1 naming each job: id, type, version, position and names that differ
    assert code == 1
    assert sorted(
        (b["id"], b["type"], b["code_version"], b["position"], b["stored"], b["asked"])
        for b in found["breaking"]
    ) == sorted((str(j), "e2e-deploy", "v1", 0, "fetch", "download") for j in old)
    # And so does its text for a terminal, a line per job
    code, text, _ = tickq.run(
        "deploy", "check", "--tasks", V2_UNSAFE, url=worker_login_url, json_out=False
    )
    assert code == 1 and "would break" in text
    assert all(str(j)[:8] in text for j in old)
    # And no step of the new code ran, nothing was written
    assert all(tickq.ran(j) == Counter(fetch=1) for j in old)
    assert all(step_names(store, j) == ["fetch"] for j in old)

    # When the patched version 2 is checked, it passes
    code, found, err = tickq.run("deploy", "check", "--tasks", V2_PATCHED, url=worker_login_url)
    assert code == 0, err
    assert (found["ok"], found["checked"]) == (True, 2)
    assert found["patches"] == [{"name": "add-ocr", "lacking": 2, "retirable": False}]

    # And deployed: a new job starts under it, and every job is approved and runs to the end
    (new,) = new_jobs(conn, 1)
    tickq.tick(V2_PATCHED, "v2")
    approve(store, [*old, new])
    tickq.tick(V2_PATCHED, "v2")

    # Then the old jobs ended on version 1's steps, the new one with the OCR step
    for job_id in old:
        assert (store.get(job_id).status, store.get(job_id).result) == (
            Status.SUCCEEDED,
            "stored doc",
        )
        assert step_names(store, job_id) == ["fetch", "approve", "store"]
        assert tickq.ran(job_id) == Counter(fetch=1, store=1)
    assert (store.get(new).status, store.get(new).result) == (Status.SUCCEEDED, "stored doc+ocr")
    assert step_names(store, new) == ["fetch", "ocr", "approve", "store"]
    assert tickq.ran(new) == Counter(fetch=1, ocr=1, store=1)

    # And `tickq show` tells the version of each step and of the last run
    code, shown, _ = tickq.run("show", str(old[0]))
    assert code == 0
    assert shown["code_version"] == "v2"
    assert [(s["name"], s["code_version"]) for s in shown["steps"]] == [
        ("fetch", "v1"),
        ("approve", "v2"),
        ("store", "v2"),
    ]


def test_the_check_refuses_bad_input_with_exit_2(tickq: Tickq, worker_login_url: str) -> None:
    code, data, err = tickq.run("deploy", "check", "--tasks", "tests.e2e.no_such_module")
    assert code == 2 and "cannot import task module" in (data or {}).get("message", err)
    code, data, err = tickq.run("deploy", "drained")
    assert code == 2 and "--version" in (data or {}).get("message", err)


def test_pinned_workers_of_two_versions_each_drain_their_own_jobs(
    tickq: Tickq, conn: psycopg.Connection, worker_login_url: str
) -> None:
    store = PostgresStore(conn)
    # Given jobs begun under version 1 by a pinned worker, waiting for approval
    old = new_jobs(conn, 2)
    tickq.tick(V1, "v1", pinned=True)
    assert {store.steps.show(j).code_version for j in old} == {"v1"}

    # When they are approved and new jobs arrive, and version 2's pinned worker ticks
    approve(store, old)
    new = new_jobs(conn, 2)
    report = tickq.tick(V2_UNSAFE, "v2", pinned=True)

    # Then it ran only the new jobs: version 1's stay runnable for version 1's workers
    assert report["claimed"] == 2
    assert all(store.get(j).status is Status.QUEUED for j in old)
    assert all(step_names(store, j) == ["fetch"] for j in old)
    assert {store.steps.show(j).code_version for j in new} == {"v2"}
    code, drained, _ = tickq.run("deploy", "drained", "--version", "v1", url=worker_login_url)
    assert (code, drained["drained"], drained["unfinished"]) == (1, False, {"queued": 2})

    # When version 1's worker ticks on until its jobs are done
    tickq.tick(V1, "v1", pinned=True)

    # Then they ended under version 1's code, and version 1 is drained
    assert all(store.get(j).result == "stored doc" for j in old)
    assert all(step_names(store, j) == ["fetch", "approve", "store"] for j in old)
    code, drained, _ = tickq.run("deploy", "drained", "--version", "v1", url=worker_login_url)
    assert (code, drained["drained"]) == (0, True)

    # And version 2's jobs end on version 2's steps
    approve(store, new)
    tickq.tick(V2_UNSAFE, "v2", pinned=True)
    assert all(step_names(store, j) == ["download", "approve", "store"] for j in new)
    assert all(tickq.ran(j) == Counter(download=1, store=1) for j in new)
