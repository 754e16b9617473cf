"""OpenTelemetry through the Lambda handlers: a trace that reaches POST /jobs (a span around
the call, or only its W3C header) or EnqueueFunction (its event's "traceparent") goes on in
the job's run by TickFunction; and without OpenTelemetry configured, importing every handler
loads none of it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from queue_core import Registry
from tests.otel_sdk import otel_on, spans
from tickq.functions import api, db, enqueue, tick

from .conftest import FakeContext, http_event

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = ("api", "tick", "enqueue", "maintenance", "scheduler", "migrate")


@pytest.fixture
def otel(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    monkeypatch.setenv("TICKQ_LEASE_SECONDS", "120")
    yield from otel_on(monkeypatch)


def tick_as_worker(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """The next invocation: TickFunction on the worker login."""
    monkeypatch.setenv("TICKQ_DATABASE_URL", url)
    db.discard()
    run_tick()


def run_tick() -> None:
    report = tick.handler({}, FakeContext())
    assert report["succeeded"] >= 1, report


@pytest.mark.usefixtures("as_app")
def test_a_span_around_post_jobs_and_the_jobs_run_share_the_trace(
    otel: InMemorySpanExporter,
    tasks: Registry,
    monkeypatch: pytest.MonkeyPatch,
    worker_login_url: str,
) -> None:
    tasks.task("embed")(lambda job: None)
    with trace.get_tracer("caller").start_as_current_span("upload") as caller:
        response = api.handler(
            http_event("POST", "/jobs", body={"type": "embed"}, sub=uuid4()), FakeContext()
        )
    assert response["statusCode"] == 202, response
    job_id = json.loads(response["body"])["id"]

    tick_as_worker(monkeypatch, worker_login_url)

    [run] = spans(otel, "process embed")
    assert run.context is not None and run.parent is not None
    assert run.context.trace_id == caller.get_span_context().trace_id
    assert run.parent.span_id == caller.get_span_context().span_id
    assert run.attributes is not None and run.attributes["messaging.message.id"] == job_id


@pytest.mark.usefixtures("as_app")
def test_post_jobs_continues_the_trace_its_traceparent_header_names(
    otel: InMemorySpanExporter,
    tasks: Registry,
    monkeypatch: pytest.MonkeyPatch,
    worker_login_url: str,
) -> None:
    tasks.task("embed")(lambda job: None)
    given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    event = http_event(
        "POST", "/jobs", body={"type": "embed"}, sub=uuid4(), headers={"traceparent": given}
    )
    assert api.handler(event, FakeContext())["statusCode"] == 202

    tick_as_worker(monkeypatch, worker_login_url)

    [run] = spans(otel, "process embed")
    assert run.context is not None and run.parent is not None
    assert f"{run.context.trace_id:032x}" == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert f"{run.parent.span_id:016x}" == "00f067aa0ba902b7"


@pytest.mark.usefixtures("as_worker")
def test_enqueue_function_takes_the_callers_traceparent(
    otel: InMemorySpanExporter, tasks: Registry
) -> None:
    tasks.task("embed")(lambda job: None)
    given = "00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-01"

    answer = enqueue.handler({"jobs": [{"type": "embed"}], "traceparent": given}, FakeContext())
    assert "error" not in answer, answer
    run_tick()

    [run] = spans(otel, "process embed")
    assert run.context is not None
    assert f"{run.context.trace_id:032x}" == "5bf92f3577b34da6a3ce929d0e0e4736"


def loaded_after_import(env: dict[str, str], prelude: str = "") -> Any:
    code = (
        prelude
        + "import sys\n"
        + "".join(f"import tickq.functions.{name}\n" for name in HANDLERS)
        + "print(sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.replace("'", '"'))


def test_without_opentelemetry_configured_the_handlers_load_none_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TICKQ_", "OTEL_"))}
    assert loaded_after_import(env) == []
    # Nor when the extra is not installed at all, whatever the setting says: the handlers
    # import, and only the first use asks for the extra.
    blocker = (
        "import sys, importlib.abc\n"
        "class Absent(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] == 'opentelemetry': raise ImportError(name=name)\n"
        "sys.meta_path.insert(0, Absent())\n"
    )
    assert loaded_after_import({**env, "TICKQ_OTEL": "on"}, blocker) == []
    check = blocker + (
        "from queue_core import telemetry\n"
        "assert telemetry.active()\n"
        "try:\n    telemetry.get()\nexcept Exception as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check],
        cwd=ROOT,
        env={**env, "TICKQ_OTEL": "on"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "pip install 'tickq[otel]'" in done.stdout
