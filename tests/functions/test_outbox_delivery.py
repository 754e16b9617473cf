"""An EventBridge outage delays events and loses none: 1,000 jobs go dead while the bus is
missing (moto refuses every entry), then the bus comes back flaky (calls that fail whole,
calls whose every entry is throttled) and MaintenanceFunction and the ticks publish the
backlog: every event arrives, in order per job, none twice by its id."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import psycopg
import pytest
from botocore.awsrequest import AWSResponse

import queue_core.policies.outbox
from queue_core import PermanentError, Registry, enqueue_many
from queue_core.policies.outbox import Outbox
from tickq.functions import maintenance, tick
from tickq.functions.aws import session

from .conftest import FakeContext

INSTANT = {"base": 0.001, "max": 0.001}
DEAD_NOW = 700  # permanent failures: one Job Dead each
FLAKY = 300  # a retry, then dead: Job Retrying, then Job Dead


class Recorder:
    """What EventBridge (moto) accepted, call by call, and a switch that makes calls fail
    before they reach it: every `fail_every`-th call fails whole (HTTP 500), the next one
    comes back with every entry throttled."""

    def __init__(self) -> None:
        self.accepted: list[dict[str, Any]] = []
        self.calls = 0
        self.fail_every = 0

    def stash(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["tickq_entries"] = params["Entries"]

    def before(self, context: dict[str, Any], **_: Any) -> Any:
        self.calls += 1
        if not self.fail_every:
            return None
        phase = self.calls % self.fail_every
        if phase == 1:
            error = {"Error": {"Code": "InternalException", "Message": "try later"}}
            return AWSResponse("https://events", 500, {}, None), error
        if phase == 2:
            entries = context["tickq_entries"]
            throttled = [{"ErrorCode": "ThrottlingException", "ErrorMessage": "slow"}] * len(
                entries
            )
            return AWSResponse("https://events", 200, {}, None), {
                "FailedEntryCount": len(entries),
                "Entries": throttled,
            }
        return None

    def after(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        results = parsed.get("Entries") or []  # none when the whole call failed
        sent = context["tickq_entries"] if results else []
        for entry, result in zip(sent, results, strict=True):
            if result.get("EventId") and not result.get("ErrorCode"):
                self.accepted.append(entry)


@pytest.fixture
def recorder(aws: None) -> Iterator[Recorder]:
    record = Recorder()
    events = session().events
    events.register("provide-client-params.events.PutEvents", record.stash)
    events.register_first("before-call.events.PutEvents", record.before)
    events.register("after-call.events.PutEvents", record.after)
    yield record


@pytest.mark.usefixtures("as_worker")
def test_an_outage_delays_the_events_of_1000_dead_jobs_and_loses_none(
    conn: psycopg.Connection,
    tasks: Registry,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TICKQ_EVENT_BUS", "jobs")
    monkeypatch.setenv("TICKQ_BATCH_SIZE", "100")
    monkeypatch.setenv("TICKQ_LEASE_SECONDS", "120")
    monkeypatch.setattr(queue_core.policies.outbox, "BACKOFF_BASE", 0.001)

    def broken(job: Any) -> None:
        raise PermanentError("bad input")

    def flaky(job: Any) -> None:
        raise RuntimeError("down")

    tasks.task("broken")(broken)
    tasks.task("flaky", max_attempts=2, backoff=INSTANT, events=["retrying"])(flaky)
    enqueue_many(conn, [{"type": "broken"}] * DEAD_NOW + [{"type": "flaky"}] * FLAKY, using=tasks)

    # The outage: the bus does not exist, so EventBridge refuses every entry. The ticks run
    # every job to its end; each tries once and leaves the events where they are.
    for _ in range(10):
        report = tick.handler({}, FakeContext())
        assert report["events"]["published"] == 0
        if not report["claimed"]:
            break
    dead = conn.execute("select count(*) from tickq.jobs where status = 'dead'").fetchone()
    assert dead == (DEAD_NOW + FLAKY,)
    backlog = Outbox(conn).backlog()
    assert backlog.pending == DEAD_NOW + 2 * FLAKY and backlog.most_attempts >= 1
    assert recorder.accepted == []

    # The bus comes back, flaky: MaintenanceFunction publishes the backlog through retries,
    # then a tick finds nothing left to send.
    boto3.client("events").create_event_bus(Name="jobs")
    recorder.fail_every = 3
    answer = maintenance.handler({}, FakeContext())
    recorder.fail_every = 0
    after = tick.handler({}, FakeContext())

    assert answer["events"]["failed"] > 0 and answer["outbox"]["pending"] == 0
    assert after["events"]["published"] == 0
    stored = conn.execute(
        "select event_id, job_id, detail_type from tickq.outbox order by id"
    ).fetchall()
    sent = [json.loads(e["Detail"]) for e in recorder.accepted]
    ids = [d["event_id"] for d in sent]
    assert len(ids) == len(set(ids)) == len(stored) == DEAD_NOW + 2 * FLAKY
    assert set(ids) == {str(event_id) for event_id, _, _ in stored}
    # In order per job: each job's events arrived as they were written.
    written: dict[str, list[str]] = {}
    for _, job_id, detail_type in stored:
        written.setdefault(str(job_id), []).append(detail_type)
    arrived: dict[str, list[str]] = {}
    for entry, detail in zip(recorder.accepted, sent, strict=True):
        arrived.setdefault(detail["id"], []).append(entry["DetailType"])
    assert arrived == written
    assert sorted({tuple(v) for v in arrived.values()}) == [
        ("Job Dead",),
        ("Job Retrying", "Job Dead"),
    ]
    assert all(e["Source"] == "tickq" and e["EventBusName"] == "jobs" for e in recorder.accepted)


@pytest.mark.usefixtures("as_worker")
def test_tickq_events_publish_sends_the_backlog_where_no_tick_runs(
    conn: psycopg.Connection,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tickq.infra.cli.program import main

    conn.execute(
        "insert into tickq.outbox (job_id, detail_type, detail)"
        " values (gen_random_uuid(), 'Job Dead', '{\"id\": \"x\"}')"
    )
    assert main(["events", "--publish"]) != 0  # no bus named: a clear error, nothing sent
    assert "TICKQ_EVENT_BUS" in capsys.readouterr().err
    boto3.client("events").create_event_bus(Name="jobs")
    monkeypatch.setenv("TICKQ_EVENT_BUS", "jobs")
    capsys.readouterr()

    assert main(["events", "--publish", "--json"]) == 0

    answer = json.loads(capsys.readouterr().out)
    assert answer["published"]["published"] == 1 and answer["backlog"]["pending"] == 0
    assert [e["DetailType"] for e in recorder.accepted] == ["Job Dead"]
