"""Every view of a job shows its timeout and, when its last attempt was stopped at it, how:
`tickq show` (and --json), the operator console's job view; SQL's tickq.enqueue takes a
timeout by name, checked as enqueue_many's."""

from __future__ import annotations

import asyncio
import json
from uuid import UUID

import psycopg
import pytest

from queue_core import JobContext, PostgresStore, Registry, Runner
from queue_core.console.jobs import OperatorConsole
from queue_core.model.jobs import TIMEOUT_LEASE_MARGIN
from tickq.infra.cli.program import main

LATER = {"base": 600, "max": 600}  # the retry stays out of the tick


@pytest.fixture(autouse=True)
def cli_database(monkeypatch: pytest.MonkeyPatch, database_url: str) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)


def timed_out_job(conn: psycopg.Connection) -> UUID:
    """A job whose attempt an async handler's timeout cancelled, retrying."""
    registry = Registry()

    @registry.task("hang", timeout=1, backoff=LATER)
    async def hang(job: JobContext) -> None:
        await asyncio.sleep(30)

    store = PostgresStore(conn)
    job_id = store.enqueue(registry.spec("hang")).id
    with Runner(store, registry, rand=lambda: 0.0) as runner:
        assert runner.tick().timed_out == 1
    return job_id


def test_show_prints_the_timeout_and_how_the_attempt_was_stopped(
    conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = timed_out_job(conn)
    capsys.readouterr()

    assert main(["show", str(job_id), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert main(["show", str(job_id)]) == 0
    human = capsys.readouterr().out

    assert shown["timeout_seconds"] == 1
    assert shown["timed_out"] == {"after_seconds": 1, "stopped": "cancelled"}
    assert "timed_out" in human and '"stopped": "cancelled"' in human


def test_a_job_that_was_not_stopped_shows_no_timed_out(
    conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = PostgresStore(conn).enqueue(Registry().spec("plain", timeout=7)).id
    capsys.readouterr()

    assert main(["show", str(job_id), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)

    assert (shown["timeout_seconds"], shown["timed_out"]) == (7, None)


def test_the_operator_job_view_shows_the_timeout_and_how_the_attempt_was_stopped(
    conn: psycopg.Connection, operator_url: str
) -> None:
    job_id = timed_out_job(conn)

    with psycopg.connect(operator_url, autocommit=True) as operator:
        detail = OperatorConsole(operator).job(job_id)

    assert detail["timeout_seconds"] == 1
    assert detail["timed_out"] == {"after_seconds": 1, "stopped": "cancelled"}
    assert detail["error"] == "timed out after 1 s (cancelled)"


def test_sql_enqueue_takes_a_timeout_by_name(conn: psycopg.Connection) -> None:
    row = conn.execute("select tickq.enqueue('render', timeout => 5)").fetchone()
    assert row is not None

    job = PostgresStore(conn).get(row[0])

    assert (job.timeout_seconds, job.lease_seconds) == (5, 5 + TIMEOUT_LEASE_MARGIN)


def test_sql_enqueue_refuses_a_timeout_out_of_bounds_and_writes_nothing(
    conn: psycopg.Connection,
) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
        conn.execute("select tickq.enqueue('render', timeout => 43201)")
    conn.rollback()

    assert refused.value.diag.column_name == "timeout"
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (0,)
