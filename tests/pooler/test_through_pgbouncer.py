"""tickq behind PgBouncer in transaction mode, with fewer server connections than clients:
what RDS Proxy does to a Lambda fleet. Ticks in parallel processes run every job exactly
once; the API's per-transaction user and role never reach another pooled client; the
long-running worker falls back to polling and says so once; schedules and maintenance run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg
import pytest

from queue_core import PostgresStore, Registry
from queue_core.model.validation import job_spec
from queue_core.policies.schedules import Schedules

from .conftest import POOL_SIZE

ROOT = Path(__file__).resolve().parents[2]
TICKERS = 8
JOBS = 3000


def tickq(*args: str, url: str, **env: str) -> subprocess.Popen[bytes]:
    """The `tickq` command in a fresh process, reaching the database through `url`."""
    command = [str(Path(sys.executable).with_name("tickq")), *args]
    environment = {
        **os.environ,
        "TICKQ_DATABASE_URL": url,
        "TICKQ_PREPARE_THRESHOLD": "off",  # what a transaction-mode pooler needs
        "PYTHONPATH": str(ROOT),
        **env,
    }
    return subprocess.Popen(
        command, cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def ticks(count: int, url: str, *options: str) -> list[subprocess.Popen[bytes]]:
    """`count` `tickq tick` processes of the pool's handlers, started at once."""
    return [
        tickq("tick", "--json", "--tasks", "tests.pooler.pool_tasks", *options, url=url)
        for _ in range(count)
    ]


def pooled(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True, prepare_threshold=None)


def test_eight_tick_processes_run_3000_jobs_exactly_once(
    conn: psycopg.Connection, pooled_url: str
) -> None:
    assert TICKERS > POOL_SIZE
    registry = Registry()
    PostgresStore(conn).enqueue_many([registry.spec("pooled", {"n": n}) for n in range(JOBS)])

    procs = ticks(TICKERS, pooled_url, "--batch-size", "50")
    outputs = [proc.communicate(timeout=300) for proc in procs]

    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode(errors="replace")
    reports = [json.loads(out) for out, _ in outputs]
    assert sum(r["succeeded"] for r in reports) == JOBS
    # How the work spreads over the ticks is the scheduler's doing: on a loaded machine one
    # process may drain the queue before the others start. Shown (-s), never asserted.
    print("jobs per tick:", sorted((r["succeeded"] for r in reports), reverse=True))
    rows = conn.execute(
        "select status, attempts, count(*) from tickq.jobs group by status, attempts"
    ).fetchall()
    assert rows == [("succeeded", 1, JOBS)]


def test_transactional_handlers_of_four_ticks_commit_each_row_once_through_the_pooler(
    conn: psycopg.Connection, pooled_url: str
) -> None:
    """Four ticks of four transactional handlers each: sixteen transactions wanting the
    three server connections; each row and its job's success still commit exactly once."""
    jobs = 400
    conn.execute("create table if not exists public.pooled_rows (job_id uuid)")
    conn.execute("truncate public.pooled_rows")
    registry = Registry()
    PostgresStore(conn).enqueue_many([registry.spec("pooled-tx", {"n": n}) for n in range(jobs)])

    procs = ticks(4, pooled_url, "--batch-size", "20", "--concurrency", "4")
    outputs = [proc.communicate(timeout=300) for proc in procs]

    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode(errors="replace")
    assert sum(json.loads(out)["succeeded"] for out, _ in outputs) == jobs
    rows = conn.execute(
        "select j.status, j.attempts, j.completed_in_transaction, count(r.job_id)"
        " from tickq.jobs j left join public.pooled_rows r on r.job_id = j.id"
        " group by j.id, j.status, j.attempts, j.completed_in_transaction"
    ).fetchall()
    assert {tuple(row) for row in rows} == {("succeeded", 1, True, 1)}
    assert len(rows) == jobs


def test_user_scope_and_role_never_bleed_between_pooled_clients(
    conn: psycopg.Connection, pooled_url: str
) -> None:
    # Given users whose stores share a pool smaller than the number of clients, on the
    # table owner's (superuser) login
    users = [uuid4() for _ in range(6)]
    failures: list[str] = []

    def client(user: Any) -> None:
        with pooled(pooled_url) as connection:
            store = PostgresStore(connection, user_id=user)
            for n in range(15):
                store.enqueue(job_spec("t", {"n": n}, user_id=user))
                owners = {job.user_id for job in store.list_jobs(limit=100).jobs}
                if owners != {user}:
                    failures.append(f"{user} saw {owners}")
                # Between the user's transactions, the pooled session is nobody's.
                row = connection.execute(
                    "select coalesce(current_setting('tickq.user_id', true), ''), current_user"
                ).fetchone()
                if row != ("", "postgres"):
                    failures.append(f"an unscoped statement ran as {row}")

    threads = [threading.Thread(target=client, args=(u,)) for u in users for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    counts = dict(conn.execute("select user_id, count(*) from tickq.jobs group by 1").fetchall())
    assert counts == {user: 30 for user in users}


def test_the_api_scopes_two_users_through_the_pooler(
    function_env: None,
    monkeypatch: pytest.MonkeyPatch,
    pooled_url: str,
    pooled_app_url: str,
    tasks: Registry,
) -> None:
    from tests.functions.conftest import FakeContext, http_event
    from tickq.functions import api, db

    alice, bob = str(uuid4()), str(uuid4())
    for url in (pooled_url, pooled_app_url):  # the owner's login, then a tickq_app member
        db.discard()
        monkeypatch.setenv("TICKQ_DATABASE_URL", url)
        monkeypatch.setenv("TICKQ_PREPARE_THRESHOLD", "off")

        def call(method: str, path: str, who: str, **options: Any) -> tuple[int, Any]:
            event = http_event(method, path, sub=who, **options)
            response = api.handler(event, FakeContext())
            return response["statusCode"], json.loads(response["body"])

        status, job = call("POST", "/jobs", alice, body={"type": "report"})
        assert status == 202, job
        assert call("GET", f"/jobs/{job['id']}", bob)[0] == 404
        assert call("POST", f"/jobs/{job['id']}/cancel", bob)[0] == 404
        assert call("GET", "/jobs", bob)[1]["jobs"] == []
        assert call("GET", f"/jobs/{job['id']}", alice)[0] == 200
    db.discard()


def test_the_long_running_worker_polls_through_the_pooler_and_says_so_once(
    conn: psycopg.Connection, pooled_url: str
) -> None:
    registry = Registry()
    PostgresStore(conn).enqueue_many([registry.spec("pooled", {"n": n}) for n in range(20)])

    proc = tickq(
        "work",
        "--json",
        "--tasks",
        "tests.pooler.pool_tasks",
        "--until-empty",
        "--poll-interval",
        "0.2",
        url=pooled_url,
    )
    out, err = proc.communicate(timeout=120)

    assert proc.returncode == 0, err.decode(errors="replace")
    assert json.loads(out)["succeeded"] == 20
    said = err.decode(errors="replace")
    assert said.count("LISTEN") == 1, said
    assert "polling" in said


def test_schedules_and_maintenance_run_through_the_pooler(
    conn: psycopg.Connection,
    pooled_worker_url: str,
    function_env: None,
    monkeypatch: pytest.MonkeyPatch,
    lambda_context: Any,
) -> None:
    from tickq.functions import db, maintenance, scheduler

    monkeypatch.setenv("TICKQ_DATABASE_URL", pooled_worker_url)
    monkeypatch.setenv("TICKQ_PREPARE_THRESHOLD", "off")
    earlier = PostgresStore(conn).now() - timedelta(minutes=2)
    Schedules(conn).add("every-minute", "* * * * *", "report", now=earlier)
    store = PostgresStore(conn)
    store.enqueue(Registry().spec("stuck"))
    store.claim(limit=1, lease_seconds=1)
    conn.execute("update tickq.jobs set lease_until = now() - interval '1 minute'")

    fired = scheduler.handler({}, lambda_context)
    swept = maintenance.handler({}, lambda_context)
    db.discard()

    assert fired["fired"] == 1, fired
    assert swept["reclaimed"] == 1, swept
    assert conn.execute("select type, status from tickq.jobs order by type").fetchall() == [
        ("report", "queued"),
        ("stuck", "retrying"),
    ]
