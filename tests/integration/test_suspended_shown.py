"""A suspended job (a durable job that left its worker to wait: here for a signal) has a
state of its own in every view, and is not runnable queue depth: the row stores it queued
with its wait, and the views read that, not the status alone."""

from __future__ import annotations

import json
from uuid import UUID

import psycopg
import pytest

from queue_core import PostgresStore
from queue_core.console.charts import depth_by_queue
from queue_core.console.jobs import JobFilter, OperatorConsole
from queue_core.model.jobs import Status
from queue_core.model.steps import FOREVER, WaitKind
from queue_core.model.validation import job_spec
from queue_core.postgres import StepStore
from tickq.functions.observability import record_depth
from tickq.infra.cli.program import main


@pytest.fixture(autouse=True)
def cli_database(monkeypatch: pytest.MonkeyPatch, database_url: str) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)


def one_suspended_one_runnable(conn: psycopg.Connection) -> tuple[UUID, UUID]:
    """A `review` job suspended until its signal "approve", and a `review` job queued."""
    store = PostgresStore(conn)
    waiting = store.enqueue(job_spec("review", {}, priority=1)).id
    (claimed,) = store.claim(limit=1)
    assert claimed.id == waiting and claimed.lease_token is not None
    StepStore(store).suspend(
        waiting, claimed.lease_token, kind=WaitKind.SIGNAL, name="approve", until=FOREVER
    )
    runnable = store.enqueue(job_spec("review", {})).id
    return waiting, runnable


def test_a_suspended_job_shows_suspended_and_a_queued_one_queued(conn: psycopg.Connection) -> None:
    waiting, runnable = one_suspended_one_runnable(conn)
    store = PostgresStore(conn)

    suspended = store.get(waiting)
    assert suspended.status is Status.QUEUED  # as stored
    assert (suspended.state, suspended.to_dict()["state"]) == ("suspended", "suspended")
    assert store.get(runnable).to_dict()["state"] == "queued"
    listed = {job.id: job.to_dict()["state"] for job in store.list_jobs().jobs}
    assert listed == {waiting: "suspended", runnable: "queued"}


def test_the_cli_lists_and_shows_a_suspended_job_as_suspended(
    conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    waiting, runnable = one_suspended_one_runnable(conn)
    capsys.readouterr()

    assert main(["jobs", "--json"]) == 0
    listed = {row["id"]: row["state"] for row in json.loads(capsys.readouterr().out)["jobs"]}
    assert main(["jobs"]) == 0
    table = capsys.readouterr().out
    assert main(["show", str(waiting), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)

    assert listed == {str(waiting): "suspended", str(runnable): "queued"}
    assert "suspended (signal)" in table
    assert (shown["state"], shown["waiting_for"]["name"]) == ("suspended", "approve")


def test_the_operator_console_shows_a_suspended_job_as_suspended(
    conn: psycopg.Connection, operator_url: str
) -> None:
    waiting, runnable = one_suspended_one_runnable(conn)

    with psycopg.connect(operator_url, autocommit=True) as operator:
        console = OperatorConsole(operator)
        listed = {row["id"]: row["state"] for row in console.jobs(JobFilter()).jobs}
        detail = console.job(waiting)

    assert listed == {str(waiting): "suspended", str(runnable): "queued"}
    assert (detail["state"], detail["status"]) == ("suspended", "queued")


def test_a_suspended_job_is_not_runnable_depth(conn: psycopg.Connection) -> None:
    one_suspended_one_runnable(conn)
    store = PostgresStore(conn)

    (queued,) = [row for row in store.stats() if row.status is Status.QUEUED]
    (operators,) = [row for row in store.stats_all_users() if row.status is Status.QUEUED]
    sent = record_depth(store.stats())

    assert (queued.count, queued.suspended, queued.runnable) == (2, 1, 1)
    assert (operators.count, operators.suspended, operators.runnable) == (2, 1, 1)
    assert depth_by_queue(store.stats())["default"][0] == 1  # the console's depth chart
    assert sent[("default", "review")]["depth"] == 1  # the queue_depth metric and alarms
    assert sent[("default", "review")]["suspended"] == 1
