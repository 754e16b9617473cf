"""Fairness groups through the Lambda functions: the API keeps a caller's groups inside the
caller's share, EnqueueFunction takes any group, MaintenanceFunction reports the most
starved group."""

from __future__ import annotations

import json
from datetime import timedelta
from uuid import uuid4

import psycopg
import pytest

from queue_core import PostgresStore, enqueue
from tickq.functions import enqueue as enqueue_function
from tickq.functions import maintenance

from .conftest import FakeContext, Invoke

ALICE = uuid4()


def groups(conn: psycopg.Connection) -> list[str]:
    return sorted(row[0] for row in conn.execute("select group_key from tickq.jobs"))


def test_the_api_puts_a_job_in_its_callers_group(call_api: Invoke, conn: psycopg.Connection):
    status, job = call_api("POST", "/jobs", body={"type": "embed"}, sub=ALICE)
    assert status == 202 and job["group_key"] == str(ALICE)


def test_a_group_given_to_the_api_stays_inside_the_callers_share(
    call_api: Invoke, conn: psycopg.Connection
):
    status, job = call_api("POST", "/jobs", body={"type": "embed", "group": "reindex"}, sub=ALICE)
    assert status == 202 and job["group_key"] == f"{ALICE}/reindex"


def test_a_bad_group_is_refused_by_the_api_and_writes_nothing(
    call_api: Invoke, conn: psycopg.Connection
):
    status, body = call_api("POST", "/jobs", body={"type": "embed", "group": "a b"}, sub=ALICE)
    assert 400 <= status < 500 and "group" in json.dumps(body)
    assert conn.execute("select count(*) from tickq.jobs").fetchone()[0] == 0


@pytest.mark.usefixtures("as_worker")
def test_enqueue_function_takes_any_group_and_defaults_to_the_owner(
    conn: psycopg.Connection, lambda_context: FakeContext
):
    owner = uuid4()
    event = {"jobs": [{"type": "t", "group": "tenant-9"}, {"type": "t", "user_id": str(owner)}]}
    enqueue_function.handler(event, lambda_context)
    assert groups(conn) == sorted(["tenant-9", str(owner)])


@pytest.mark.usefixtures("as_worker")
def test_enqueue_function_refuses_a_bad_group_and_writes_nothing(
    conn: psycopg.Connection, lambda_context: FakeContext
):
    answer = enqueue_function.handler({"type": "t", "group": "-x"}, lambda_context)
    assert "group" in answer["message"]
    assert groups(conn) == []


@pytest.mark.usefixtures("as_worker")
def test_maintenance_reports_the_most_starved_group(
    conn: psycopg.Connection, lambda_context: FakeContext, capsys: pytest.CaptureFixture[str]
):
    now = PostgresStore(conn).now()
    enqueue(conn, "embed", group="left-behind", now=now - timedelta(seconds=300))
    enqueue(conn, "embed", group="served", now=now - timedelta(seconds=10))

    answer = maintenance.handler({}, lambda_context)

    assert answer["most_starved_group"]["group"] == "left-behind"
    assert answer["most_starved_group"]["oldest_runnable_seconds"] >= 300
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    ages = [b["most_starved_group_age"] for b in blobs if "most_starved_group_age" in b]
    assert ages and ages[0][0] >= 300
