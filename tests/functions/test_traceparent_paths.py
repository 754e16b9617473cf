"""The W3C traceparent through the handlers, against real PostgreSQL: POST /jobs ignores a
header that is not valid (the job records no trace, so its run starts one of its own), and
EnqueueFunction refuses an event whose "traceparent" is not valid, writing nothing; the
valid ones are recorded as the enqueuer's trace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from queue_core import Registry
from tests.otel_sdk import otel_on
from tickq.functions import api, enqueue

from .conftest import FakeContext, http_event

TRACE, PARENT = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
GOOD = f"00-{TRACE}-{PARENT}-01"
# Each accepted by some path before: OpenTelemetry's own parser takes the first three.
BROKEN = {
    "a newline after": f"{GOOD}\n",
    "a space before": f" {GOOD}",
    "a control character in a later version's fields": f"01-{TRACE}-{PARENT}-01-\x00",
    "upper-case": GOOD.upper(),
    "version ff": f"ff-{TRACE}-{PARENT}-01",
    "zero trace id": f"00-{'0' * 32}-{PARENT}-01",
    "zero parent id": f"00-{TRACE}-{'0' * 16}-01",
    "version 00 with more": f"{GOOD}-more",
    "two joined": f"{GOOD},{GOOD}",
}


@pytest.fixture
def otel(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    yield from otel_on(monkeypatch)


def recorded(conn: psycopg.Connection) -> list[str | None]:
    return [row[0] for row in conn.execute("select traceparent from tickq.jobs").fetchall()]


@pytest.mark.usefixtures("as_app", "otel")
@pytest.mark.parametrize(
    "header", [pytest.param(v, id=k) for k, v in BROKEN.items() if k != "a space before"]
)
def test_post_jobs_ignores_a_traceparent_header_that_is_not_valid(
    tasks: Registry, conn: psycopg.Connection, header: str
) -> None:
    tasks.task("embed")(lambda job: None)
    event = http_event(
        "POST",
        "/jobs",
        body={"type": "embed"},
        sub=uuid4(),
        headers={"traceparent": header, "tracestate": "vendor=1"},
    )
    response = api.handler(event, FakeContext())
    assert response["statusCode"] == 202, response
    assert recorded(conn) == [None]


@pytest.mark.usefixtures("as_app", "otel")
@pytest.mark.parametrize(
    "header", [f" {GOOD}\t", f"cc-{TRACE}-{PARENT}-01-later-fields"], ids=["spaces", "later"]
)
def test_post_jobs_continues_a_valid_header_as_version_00(
    tasks: Registry, conn: psycopg.Connection, header: str
) -> None:
    tasks.task("embed")(lambda job: None)
    event = http_event(
        "POST", "/jobs", body={"type": "embed"}, sub=uuid4(), headers={"traceparent": header}
    )
    assert api.handler(event, FakeContext())["statusCode"] == 202
    assert recorded(conn) == [GOOD]


@pytest.mark.usefixtures("as_worker")
@pytest.mark.parametrize("with_otel", [True, False], ids=["otel-on", "otel-off"])
@pytest.mark.parametrize(
    "value",
    [
        *(pytest.param(v, id=k) for k, v in BROKEN.items()),
        pytest.param(7, id="a number"),
        pytest.param("", id="empty"),
    ],
)
def test_enqueue_function_refuses_a_traceparent_that_is_not_valid_and_writes_nothing(
    tasks: Registry,
    conn: psycopg.Connection,
    request: pytest.FixtureRequest,
    value: Any,
    with_otel: bool,
) -> None:
    if with_otel:  # refused alike, so an event valid with tracing off stays valid with it on
        request.getfixturevalue("otel")
    tasks.task("embed")(lambda job: None)
    for event in (
        {"type": "embed", "traceparent": value},
        {"jobs": [{"type": "embed"}], "traceparent": value},
    ):
        answer = enqueue.handler(event, FakeContext())
        assert (answer["error"], answer["field"]) == ("InvalidJob", "traceparent"), answer
        assert "W3C traceparent" in answer["message"]
        json.dumps(answer)  # the answer goes back to the invoking function as JSON
    assert recorded(conn) == []


@pytest.mark.usefixtures("as_worker", "otel")
def test_enqueue_function_records_a_valid_traceparent_and_takes_null_as_none(
    tasks: Registry, conn: psycopg.Connection
) -> None:
    tasks.task("embed")(lambda job: None)
    assert "jobs" in enqueue.handler({"type": "embed", "traceparent": GOOD}, FakeContext())
    assert "jobs" in enqueue.handler({"type": "embed", "traceparent": None}, FakeContext())
    assert sorted(recorded(conn), key=str) == [GOOD, None]
