"""TickFunction against real PostgreSQL (as a tickq_worker login) and moto for AWS."""

from __future__ import annotations

import json
import socket
import threading
from datetime import timedelta
from typing import Any

import boto3
import psycopg
import pytest

import queue_core.runner.pipeline
from queue_core import (
    ConfigurationError,
    JobContext,
    PermanentError,
    PostgresStore,
    Registry,
    enqueue,
    enqueue_many,
)
from queue_core.policies.outbox import Outbox
from tickq.functions import tick
from tickq.functions.aws import session

from .conftest import FakeContext, lambda_function, record_invokes, sample_event


@pytest.fixture(autouse=True)
def _worker(as_worker: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # Longer than the fake context's 60 s plus the default 10 s margin.
    monkeypatch.setenv("TICKQ_LEASE_SECONDS", "120")


def statuses(conn: psycopg.Connection) -> list[str]:
    return [row[0] for row in conn.execute("select status from tickq.jobs order by created_at")]


def test_sample_event_drains_the_queue(
    conn: psycopg.Connection, tasks: Registry, lambda_context: FakeContext
) -> None:
    tasks.task("double")(lambda job: {"n": job.payload["n"] * 2})
    for n in range(25):
        enqueue(conn, "double", {"n": n}, using=tasks)

    report = tick.handler(sample_event("tick"), lambda_context)

    assert report["claimed"] == report["succeeded"] == 25
    assert set(statuses(conn)) == {"succeeded"}


def test_stops_before_the_remaining_time_runs_out(
    conn: psycopg.Connection, tasks: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given each job "takes" 4 s of a 60 s invocation and ticks stop at a 10 s margin
    context = FakeContext(remaining_ms=60_000)

    def slow(job: JobContext) -> None:
        context.spend(4_000)

    tasks.task("slow")(slow)
    # Batches of 8 s are slow ones, never leased ahead; the runner judges that by the real
    # clock, which this fake budget does not move, so say it here.
    monkeypatch.setattr(queue_core.runner.pipeline, "QUICK_BATCH_SECONDS", 0.0)
    monkeypatch.setenv("TICKQ_BATCH_SIZE", "2")
    monkeypatch.setenv("TICKQ_CONCURRENCY", "1")
    for _ in range(30):
        enqueue(conn, "slow", using=tasks)

    report = tick.handler({}, context)

    # Then it claimed only while more than the margin remained: 60 s -> 4 s in 7 batches,
    # the last one starting with 12 s left, none with 10 s or less.
    assert report["claimed"] == 14 and report["batches"] == 7
    assert context.get_remaining_time_in_millis() == 4_000
    assert statuses(conn).count("queued") == 16


def test_a_handler_whose_timeout_does_not_fit_in_the_time_left_is_not_started(
    conn: psycopg.Connection, tasks: Registry
) -> None:
    # 60 s left less the 10 s margin: a 55 s timeout does not fit, a 5 s one does.
    ran: list[str] = []
    tasks.task("long", timeout=55)(lambda job: ran.append("long"))
    tasks.task("short", timeout=5)(lambda job: ran.append("short"))
    enqueue(conn, "long", using=tasks)
    enqueue(conn, "short", using=tasks)

    report = tick.handler({}, FakeContext(remaining_ms=60_000))

    assert ran == ["short"]
    assert (report["succeeded"], report["snoozed"], report["timed_out"]) == (1, 1, 0)
    # Put back for a later tick, its attempt given back.
    assert statuses(conn) == ["queued", "succeeded"]


def test_a_tick_whose_abandoned_handlers_pass_the_bound_claims_no_more(
    conn: psycopg.Connection,
    tasks: Registry,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a plain handler that hangs past its timeout, quick jobs due after that timeout,
    # and a tick that lives with no abandoned thread (the bound 0)
    monkeypatch.setenv("TICKQ_MAX_ABANDONED_HANDLERS", "0")
    release = threading.Event()
    ran: list[str] = []
    tasks.task("hang", timeout=1, max_attempts=1)(lambda job: release.wait(30))
    tasks.task("quick")(lambda job: ran.append("quick"))
    enqueue(conn, "hang", priority=5, using=tasks)
    for _ in range(2):
        enqueue(conn, "quick", delay=3, using=tasks)

    # When the tick runs
    try:
        report = tick.handler({}, FakeContext(remaining_ms=60_000))
    finally:
        release.set()

    # Then the hung job failed at its timeout and the tick claimed nothing after it
    assert ran == []
    assert report["abandoned_past_bound"] is True and report["abandoned_handlers"] == 1
    assert (report["claimed"], report["timed_out"], report["dead"]) == (1, 1, 1)
    assert statuses(conn) == ["dead", "queued", "queued"]
    # and the gauge went out with the tick's metrics.
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert blobs[0]["abandoned_handlers"] == [1.0]


def test_refuses_to_start_when_the_lease_is_not_longer_than_timeout_plus_margin(
    conn: psycopg.Connection, tasks: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks.task("t")(lambda job: None)
    enqueue(conn, "t", using=tasks)
    monkeypatch.setenv("TICKQ_LEASE_SECONDS", "70")  # == 60 s + 10 s margin: too short

    with pytest.raises(ConfigurationError, match="TICKQ_LEASE_SECONDS"):
        tick.handler({}, FakeContext(remaining_ms=60_000))
    assert statuses(conn) == ["queued"]


def test_refuses_a_task_whose_own_lease_is_not_longer_than_timeout_plus_margin(
    conn: psycopg.Connection, tasks: Registry
) -> None:
    # The environment's lease (120 s) is long enough; one task declares a shorter one.
    tasks.task("ok", lease_seconds=71)(lambda job: None)
    tasks.task("embed", lease_seconds=60)(lambda job: None)
    enqueue(conn, "ok", using=tasks)

    with pytest.raises(ConfigurationError) as refused:
        tick.handler({}, FakeContext(remaining_ms=60_000))

    message = str(refused.value)
    assert "task 'embed' has lease_seconds=60" in message
    assert "'ok'" not in message
    assert "longer than the function timeout (60 s) plus the safety margin" in message
    assert statuses(conn) == ["queued"]


@pytest.mark.parametrize(
    "event",
    [
        [1],
        "tick",
        {"fanout_depth": -1},
        {"fanout_depth": "2"},
        {"queues": "default"},
        {"queues": ["bad queue!"]},
        {"max_batches": 0},
    ],
)
def test_malformed_events_are_answered_and_claim_nothing(
    conn: psycopg.Connection, tasks: Registry, lambda_context: FakeContext, event: Any
) -> None:
    tasks.task("t")(lambda job: None)
    enqueue(conn, "t", using=tasks)

    answer = tick.handler(event, lambda_context)

    assert answer["error"] == "BadRequest" and answer["message"]
    assert statuses(conn) == ["queued"]


def test_queues_in_the_event_choose_what_is_claimed(
    conn: psycopg.Connection, tasks: Registry, lambda_context: FakeContext
) -> None:
    tasks.task("t")(lambda job: None)
    enqueue(conn, "t", queue="mail", using=tasks)
    enqueue(conn, "t", queue="default", using=tasks)

    report = tick.handler({"queues": ["mail"]}, lambda_context)

    assert report["claimed"] == 1
    assert sorted(statuses(conn)) == ["queued", "succeeded"]


def test_emits_tick_metrics(
    conn: psycopg.Connection,
    tasks: Registry,
    lambda_context: FakeContext,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tasks.task("t")(lambda job: None)
    enqueue(conn, "t", using=tasks)

    tick.handler({}, lambda_context)

    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert len(blobs) == 1
    names = {m["Name"] for m in blobs[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert {"claimed", "succeeded", "retried", "dead", "reclaimed", "lost_leases"} <= names
    assert blobs[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "tickq"
    assert blobs[0]["claimed"] == [1.0] and "tick_duration" in blobs[0]


def _bus_to_queue() -> str:
    """An EventBridge bus whose tickq events land in an SQS queue; returns the queue URL."""
    events, sqs = boto3.client("events"), boto3.client("sqs")
    events.create_event_bus(Name="jobs")
    queue_url = sqs.create_queue(QueueName="dead-jobs")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
    events.put_rule(
        Name="dead", EventBusName="jobs", EventPattern=json.dumps({"source": ["tickq"]})
    )
    events.put_targets(
        Rule="dead",
        EventBusName="jobs",
        Targets=[{"Id": "q", "Arn": arn["Attributes"]["QueueArn"]}],
    )
    return queue_url


@pytest.mark.usefixtures("aws")
def test_a_job_going_dead_puts_a_job_dead_event_on_the_bus(
    conn: psycopg.Connection,
    tasks: Registry,
    lambda_context: FakeContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queue_url = _bus_to_queue()
    monkeypatch.setenv("TICKQ_EVENT_BUS", "jobs")

    def broken(job: JobContext) -> None:
        raise PermanentError("bad input file")

    tasks.task("convert")(broken)
    job = enqueue(conn, "convert", queue="media", using=tasks)

    report = tick.handler({"queues": ["media"]}, lambda_context)

    assert report["dead"] == 1 and report["events"]["published"] == 1
    messages = boto3.client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)
    [message] = messages["Messages"]
    event = json.loads(message["Body"])
    assert event["source"] == "tickq" and event["detail-type"] == "Job Dead"
    [stored] = Outbox(conn).events(job_id=job.id)
    assert stored["published_at"] is not None
    assert event["detail"] == {
        "event_id": str(stored["event_id"]),
        "id": str(job.id),
        "type": "convert",
        "queue": "media",
        "attempts": 1,
        "max_attempts": 3,
        "compensation_runs": 0,
        "error": "PermanentError: bad input file",
    }


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize(("depth", "expected"), [(0, 1), (1, 1), (2, 0)])
def test_a_deep_backlog_fans_out_one_hop_at_a_time_up_to_the_maximum(
    conn: psycopg.Connection,
    tasks: Registry,
    monkeypatch: pytest.MonkeyPatch,
    depth: int,
    expected: int,
) -> None:
    arn = lambda_function("tickq-tick")
    invokes = record_invokes()
    monkeypatch.setenv("TICKQ_MAX_FANOUT", "2")
    monkeypatch.setenv("TICKQ_BATCH_SIZE", "5")
    tasks.task("t")(lambda job: None)
    for _ in range(12):
        enqueue(conn, "t", using=tasks)

    report = tick.handler({"fanout_depth": depth}, FakeContext(name="tickq-tick"))

    assert report["fanned_out"] == expected and report["claimed"] == 12
    assert (
        invokes == [{"function": arn, "fanout_depth": depth + 1, "queues": ["default"]}] * expected
    )


@pytest.mark.usefixtures("aws")
def test_no_fan_out_when_the_first_batch_is_not_full(
    conn: psycopg.Connection, tasks: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    lambda_function("tickq-tick")
    invokes = record_invokes()
    monkeypatch.setenv("TICKQ_MAX_FANOUT", "3")
    tasks.task("t")(lambda job: None)
    enqueue(conn, "t", using=tasks)

    report = tick.handler({}, FakeContext(name="tickq-tick"))

    assert report["fanned_out"] == 0 and invokes == []


def test_reclaims_expired_leases_before_claiming(
    conn: psycopg.Connection, tasks: Registry, lambda_context: FakeContext
) -> None:
    tasks.task("t")(lambda job: None)
    store = PostgresStore(conn)
    earlier = store.now() - timedelta(minutes=5)
    job = enqueue(conn, "t", max_attempts=1, using=tasks, now=earlier)
    assert len(store.claim(lease_seconds=1, now=earlier)) == 1

    report = tick.handler({}, lambda_context)

    assert report["reclaimed"] == 1 and report["dead"] == 1
    assert store.get(job.id).status == "dead"


@pytest.mark.usefixtures("aws")
def test_a_dead_job_event_that_cannot_be_published_never_fails_the_tick(
    conn: psycopg.Connection,
    tasks: Registry,
    lambda_context: FakeContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TICKQ_EVENT_BUS", "no-such-bus")  # never created: EventBridge refuses

    def broken(job: JobContext) -> None:
        raise PermanentError("bad input file")

    tasks.task("convert")(broken)
    job = enqueue(conn, "convert", queue="media", using=tasks)

    report = tick.handler({"queues": ["media"]}, lambda_context)

    assert report["dead"] == 1 and report["events"]["published"] == 0
    assert PostgresStore(conn).get(job.id).status == "dead"
    # The event waits in the outbox for a run that can publish it.
    [stored] = Outbox(conn).events(job_id=job.id, pending_only=True)
    assert stored["detail_type"] == "Job Dead" and stored["attempts"] >= 1
    assert "no-such-bus" in stored["last_error"] or stored["last_error"]


@pytest.mark.usefixtures("aws")
def test_a_fan_out_that_failed_is_not_asked_again_in_the_same_invocation(
    conn: psycopg.Connection, tasks: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a backlog of six full batches and a Lambda endpoint that refuses connections
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", f"http://127.0.0.1:{port}")
    invokes = record_invokes()
    monkeypatch.setenv("TICKQ_MAX_FANOUT", "1")
    monkeypatch.setenv("TICKQ_BATCH_SIZE", "5")
    tasks.task("t")(lambda job: None)
    enqueue_many(conn, [{"type": "t"}] * 30, using=tasks)

    report = tick.handler({}, FakeContext(name="tickq-tick"))

    # Then every batch ran, and the fan-out was asked for once
    assert report["claimed"] == 30 and report["fanned_out"] == 0
    assert len(invokes) == 1


@pytest.mark.usefixtures("aws")
def test_the_time_a_fan_out_took_counts_against_the_drain(
    conn: psycopg.Connection, tasks: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a fan-out that takes 52 s of a 60 s invocation (10 s margin), asked for after
    # the first full claim
    context = FakeContext(remaining_ms=60_000, name="tickq-tick")
    lambda_function("tickq-tick")
    session().events.register("before-call.lambda.Invoke", lambda **_: context.spend(52_000))
    monkeypatch.setenv("TICKQ_MAX_FANOUT", "1")
    monkeypatch.setenv("TICKQ_BATCH_SIZE", "5")
    tasks.task("t")(lambda job: None)
    enqueue_many(conn, [{"type": "t"}] * 30, using=tasks)

    report = tick.handler({}, context)

    # Then nothing was claimed after it: the jobs of the first claim (a batch) ran and were
    # saved
    assert report["fanned_out"] == 1 and report["claimed"] == 5 and report["batches"] == 1
    assert report["succeeded"] == 5


def test_transactional_and_batch_handlers_run_in_the_tick_function(
    conn: psycopg.Connection, tasks: Registry, lambda_context: FakeContext
) -> None:
    """The function's transactional handlers run on connections of their own, opened as the
    environment's, kept for the next invocation; batch handlers get their jobs together."""
    conn.execute("create table if not exists public.tick_rows (job_id uuid)")
    conn.execute("truncate public.tick_rows")
    conn.execute("grant insert on public.tick_rows to tickq_worker")
    sizes: list[int] = []
    tasks.task("embed", batch_size=5)(lambda batch: sizes.append(len(batch)))

    def charge(job: JobContext, tx: psycopg.Connection) -> None:
        tx.execute("insert into public.tick_rows values (%s)", (job.id,))

    tasks.task("charge", transactional=True)(charge)
    for _ in range(3):
        enqueue(conn, "charge", using=tasks)
        enqueue(conn, "embed", using=tasks)

    first = tick.handler(sample_event("tick"), lambda_context)
    enqueue(conn, "charge", using=tasks)
    second = tick.handler(sample_event("tick"), lambda_context)

    assert (first["succeeded"], second["succeeded"]) == (6, 1)
    assert sizes == [3]
    assert conn.execute("select count(*) from public.tick_rows").fetchone() == (4,)
    assert tick._handler_connections.opened <= 3  # reused by the second invocation


def test_a_fan_out_finishes_in_the_tick_that_started_it(
    conn: psycopg.Connection, tasks: Registry, lambda_context: FakeContext
) -> None:
    """A parent that maps over children suspends until they end: its children, its
    completion and the job its success releases are claimed by the same tick, which stops
    for its deadline or an empty queue, never because a job suspended."""
    # Given a parent mapping over five children, two at a time, and a job enqueued after it
    tasks.task("parts")(
        lambda job: job.map("parts", "part", [{"n": n} for n in range(5)], max_concurrency=2)
    )
    tasks.task("part")(lambda job: job.payload["n"] * 10)
    tasks.task("report")(lambda job: list(job.parent_results.values()))
    parent = enqueue(conn, "parts", using=tasks).id
    enqueue(conn, "report", using=tasks, after=[parent])

    # When one tick runs
    report = tick.handler(sample_event("tick"), lambda_context)

    # Then every job has ended within it: the parent with its children's results
    assert set(statuses(conn)) == {"succeeded"}
    results = conn.execute("select type, result from tickq.jobs where type <> 'part'").fetchall()
    assert sorted(results) == [("parts", [0, 10, 20, 30, 40]), ("report", [[0, 10, 20, 30, 40]])]
    assert (report["succeeded"], report["suspended"]) == (7, 1)
