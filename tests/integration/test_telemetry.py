"""OpenTelemetry end to end with the SDK's in-memory exporter: the trace an enqueuer's span
belongs to continues into the job's run on another connection (a consumer span parented by
the stored context), each durable step is a child span of the run, each batch's claim and
finish one span, and the metrics count completed jobs by type and outcome."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from queue_core import PermanentError, Registry, Runner, enqueue, enqueue_many
from queue_core.postgres import PostgresStore
from tests.otel_sdk import READER, otel_on, spans


@pytest.fixture
def otel(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    yield from otel_on(monkeypatch)


def drain(conn: psycopg.Connection, tasks: Registry, batch_size: int = 10) -> None:
    with Runner(PostgresStore(conn), tasks, batch_size=batch_size, concurrency=1) as runner:
        runner.tick()


def test_a_job_run_continues_the_trace_of_the_span_around_its_enqueue(
    otel: InMemorySpanExporter, conn: psycopg.Connection, connect: Any
) -> None:
    tasks = Registry()
    tasks.task("embed")(lambda job: {"ok": True})
    tracer = trace.get_tracer("the caller")

    with tracer.start_as_current_span("POST /documents") as request:
        job = enqueue(conn, "embed", using=tasks).job
    assert job is not None
    stored = conn.execute("select traceparent from tickq.jobs where id = %s", (job.id,))
    traceparent = stored.fetchone()[0]  # type: ignore[index]
    context = request.get_span_context()
    flags = int(context.trace_flags)
    assert traceparent == f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"

    drain(connect(), tasks)  # another connection, as another invocation would

    [run] = spans(otel, "process embed")
    assert run.kind is SpanKind.CONSUMER
    assert run.context is not None and run.parent is not None
    assert run.context.trace_id == context.trace_id
    assert run.parent.span_id == context.span_id
    assert run.attributes is not None
    assert dict(run.attributes) == {
        "messaging.system": "tickq",
        "messaging.operation": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": "embed",
        "messaging.message.id": str(job.id),
        "tickq.queue": "default",
        "tickq.attempt": 1,
        "tickq.outcome": "succeeded",
    }


def test_a_steps_span_is_a_child_of_its_jobs_and_batches_get_one_claim_and_finish_span(
    otel: InMemorySpanExporter, conn: psycopg.Connection
) -> None:
    tasks = Registry()

    @tasks.task("pipeline")
    def pipeline(job: Any) -> Any:
        return job.step("fetch", lambda: 1) + job.step("parse", lambda: 2)

    tasks.task("plain")(lambda job: None)
    enqueue(conn, "pipeline", using=tasks)
    enqueue_many(conn, [{"type": "plain"}] * 9, using=tasks)

    drain(conn, tasks, batch_size=10)

    [run] = spans(otel, "process pipeline")
    assert run.context is not None
    for name in ("step fetch", "step parse"):
        [step] = spans(otel, name)
        assert step.parent is not None and step.parent.span_id == run.context.span_id
        assert step.context is not None and step.context.trace_id == run.context.trace_id
    assert len(spans(otel, "process plain")) == 9
    # One claim and one finish for the batch of ten, not one per job.
    assert len(spans(otel, "tickq claim")) == 1
    [finish] = spans(otel, "tickq finish")
    assert finish.attributes is not None
    assert finish.attributes["messaging.batch.message_count"] == 10


def test_the_metrics_count_jobs_by_type_and_outcome(
    otel: InMemorySpanExporter, conn: psycopg.Connection
) -> None:
    tasks = Registry()

    def broken(job: Any) -> None:
        raise PermanentError("no")

    tasks.task("broken")(broken)
    tasks.task("fine")(lambda job: None)
    before = completed()
    enqueue_many(conn, [{"type": "broken"}, {"type": "fine"}, {"type": "fine"}], using=tasks)

    drain(conn, tasks)

    after = completed()
    assert after.get(("fine", "succeeded"), 0) - before.get(("fine", "succeeded"), 0) == 2
    assert after.get(("broken", "dead"), 0) - before.get(("broken", "dead"), 0) == 1


def completed() -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    data = READER.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != "tickq.jobs.completed":
                    continue
                for point in metric.data.data_points:
                    key = (
                        str(point.attributes["tickq.type"]),
                        str(point.attributes["tickq.outcome"]),
                    )
                    counts[key] = int(point.value)
    return counts


def test_no_span_no_context_and_sql_enqueue_takes_the_setting(
    otel: InMemorySpanExporter, conn: psycopg.Connection
) -> None:
    tasks = Registry()
    plain = enqueue(conn, "t", using=tasks).id
    given = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with conn.transaction():
        conn.execute("select set_config('tickq.traceparent', %s, true)", (given,))
        by_sql = conn.execute("select tickq.enqueue('t')").fetchone()[0]  # type: ignore[index]
    later = conn.execute("select tickq.enqueue('t')").fetchone()[0]  # type: ignore[index]

    rows = dict(conn.execute("select id, traceparent from tickq.jobs").fetchall())
    assert rows == {plain: None, by_sql: given, later: None}


def test_a_malformed_trace_context_is_refused_and_writes_nothing(conn: psycopg.Connection) -> None:
    refused = pytest.raises(psycopg.errors.CheckViolation, match="jobs_traceparent_check")
    with refused, conn.transaction():
        conn.execute("select set_config('tickq.traceparent', 'not-a-context', true)")
        conn.execute("select tickq.enqueue('t')")
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (0,)
