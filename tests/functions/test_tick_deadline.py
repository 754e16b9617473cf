"""TickFunction keeps its deadline when the AWS endpoints hang: real PostgreSQL, a real
clock, and a local socket standing in for Lambda and EventBridge that accepts connections
and never answers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import psycopg
import pytest

from queue_core import JobContext, PermanentError, Registry, enqueue, enqueue_many
from tickq.functions import aws, tick
from tickq.infra.local.lambda_context import LocalContext

DEADLINE_SECONDS = 10.0


@dataclass
class HungEndpoint:
    """Accepts every connection, reads the request's headers, never answers. `calls` holds
    (operation, botocore's invocation id) per attempt: retries of one call share the id."""

    url: str
    calls: list[tuple[str, str]] = field(default_factory=list)

    def operations(self, name: str) -> set[str]:
        """The distinct calls (not attempts) of the operation `name` that reached it."""
        return {call for op, call in self.calls if op == name}


@pytest.fixture
def hung_endpoint() -> Iterator[HungEndpoint]:
    server = socket.create_server(("127.0.0.1", 0), backlog=64)
    endpoint = HungEndpoint(f"http://127.0.0.1:{server.getsockname()[1]}")
    held: list[socket.socket] = []
    stopped = threading.Event()

    def read_headers(conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower().split("\r\n")
        headers = dict(line.split(": ", 1) for line in head[1:] if ": " in line)
        op = "Invoke" if "/functions/" in head[0] else headers.get("x-amz-target", "?")
        endpoint.calls.append((op, headers.get("amz-sdk-invocation-id", "?")))

    def serve() -> None:
        server.settimeout(0.1)
        while not stopped.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            held.append(conn)  # kept open, never answered
            threading.Thread(target=read_headers, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield endpoint
    stopped.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.fixture
def aws_at(hung_endpoint: HungEndpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[HungEndpoint]:
    """Lambda and EventBridge at the hung endpoint, with credentials that sign but are fake."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_LAMBDA": hung_endpoint.url,
        "AWS_ENDPOINT_URL_EVENTBRIDGE": hung_endpoint.url,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    aws.reset()
    yield hung_endpoint
    aws.reset()


@pytest.mark.usefixtures("as_worker")
def test_a_tick_against_hung_aws_endpoints_returns_before_its_deadline(
    conn: psycopg.Connection,
    tasks: Registry,
    aws_at: HungEndpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a backlog that fills many batches of short jobs, one job that goes dead (a
    # "Job Dead" event to publish), fan-out allowed, and a 10 s invocation with a 3 s margin
    monkeypatch.setenv("TICKQ_LEASE_SECONDS", "60")
    monkeypatch.setenv("TICKQ_SAFETY_MARGIN_MS", "3000")
    monkeypatch.setenv("TICKQ_MAX_FANOUT", "1")
    monkeypatch.setenv("TICKQ_BATCH_SIZE", "5")
    monkeypatch.setenv("TICKQ_CONCURRENCY", "5")
    monkeypatch.setenv("TICKQ_EVENT_BUS", "jobs")

    def broken(job: JobContext) -> None:
        raise PermanentError("bad input")

    tasks.task("broken")(broken)
    tasks.task("short")(lambda job: time.sleep(0.02))
    enqueue(conn, "broken", priority=10, using=tasks)
    enqueue_many(conn, [{"type": "short"}] * 2000, using=tasks)
    context = LocalContext("tickq-tick", timeout_seconds=DEADLINE_SECONDS)
    started = time.monotonic()

    report = tick.handler({}, context)

    # Then it returned in time, after several batches, having asked for a fan-out once (in
    # at most two attempts) and tried to publish the dead job's event
    took = time.monotonic() - started
    print(f"tick took {took:.2f} s of its {DEADLINE_SECONDS:.0f} s")
    assert took < DEADLINE_SECONDS, f"overran its deadline by {took - DEADLINE_SECONDS:.2f} s"
    assert report["batches"] >= 3 and report["dead"] == 1
    assert report["fanned_out"] == 0 and report["events"]["published"] == 0
    assert len(aws_at.operations("Invoke")) == 1
    assert len([op for op, _ in aws_at.calls if op == "Invoke"]) <= aws.MAX_ATTEMPTS
    assert len(aws_at.operations("awsevents.putevents")) == 1
