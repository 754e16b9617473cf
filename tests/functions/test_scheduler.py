"""SchedulerFunction: due cron occurrences become jobs, once, however often it runs."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from queue_core import PostgresStore
from queue_core.policies.schedules import Schedules
from tickq.functions import scheduler

from .conftest import FakeContext, sample_event

pytestmark = pytest.mark.usefixtures("as_worker")


def test_a_due_occurrence_is_enqueued_once_across_runs(
    conn: psycopg.Connection, lambda_context: FakeContext
) -> None:
    # Given a schedule created two minutes ago that fires every minute
    earlier = PostgresStore(conn).now() - timedelta(minutes=2)
    Schedules(conn).add("nightly", "* * * * *", "report", {"kind": "daily"}, now=earlier)

    first = scheduler.handler(sample_event("scheduler"), lambda_context)
    second = scheduler.handler(sample_event("scheduler"), lambda_context)

    assert first["fired"] == 1 and second["due"] == 0
    rows = conn.execute("select type, payload, idempotency_key from tickq.jobs").fetchall()
    assert len(rows) == 1
    assert rows[0][:2] == ("report", {"kind": "daily"})
    assert rows[0][2].startswith("cron:nightly:")


def test_nothing_due_enqueues_nothing(
    conn: psycopg.Connection, lambda_context: FakeContext, capsys: pytest.CaptureFixture[str]
) -> None:
    Schedules(conn).add("yearly", "0 0 1 1 *", "report", timezone="Asia/Tokyo")

    answer = scheduler.handler({}, lambda_context)

    assert answer["due"] == answer["fired"] == 0
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (0,)
    assert '"schedules_fired":[0.0]' in capsys.readouterr().out.replace(" ", "")
