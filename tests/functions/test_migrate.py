"""MigrateFunction answers CloudFormation through a local server standing in for S3."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import psycopg
import pytest

from queue_core.migrate import BASELINE, available
from tickq.functions import migrate as migrate_function

from .conftest import FakeContext, sample_event


class ResponseBucket:
    """An HTTP server that records the PUTs a pre-signed ResponseURL would receive."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        bucket = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                length = int(self.headers["Content-Length"])
                bucket.received.append(
                    {
                        "path": self.path,
                        "content_type": self.headers.get("Content-Type"),
                        "body": json.loads(self.rfile.read(length)),
                    }
                )
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/stack/Schema?X-Sig=abc"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def bucket() -> Iterator[ResponseBucket]:
    server = ResponseBucket()
    yield server
    server.close()


def request(kind: str, url: str) -> dict[str, Any]:
    event = sample_event("migrate")
    event["RequestType"] = kind
    event["ResponseURL"] = url
    if kind != "Create":
        event["PhysicalResourceId"] = "tickq-schema"
    return dict(event)


def applied(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        exists = conn.execute("select to_regclass('tickq.schema_migrations')").fetchone()
        if not exists or exists[0] is None:
            return []
        return [r[0] for r in conn.execute("select version from tickq.schema_migrations")]


@pytest.mark.parametrize("kind", ["Create", "Update"])
def test_create_and_update_migrate_and_answer_success(
    function_env: None,
    monkeypatch: pytest.MonkeyPatch,
    fresh_database_url: str,
    bucket: ResponseBucket,
    lambda_context: FakeContext,
    kind: str,
) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", fresh_database_url)

    migrate_function.handler(request(kind, bucket.url), lambda_context)

    assert sorted(applied(fresh_database_url)) == [BASELINE, *(m.version for m in available())]
    [put] = bucket.received
    assert put["path"] == "/stack/Schema?X-Sig=abc" and put["content_type"] == ""
    body = put["body"]
    assert body["Status"] == "SUCCESS" and body["PhysicalResourceId"] == "tickq-schema"
    assert body["RequestId"] == sample_event("migrate")["RequestId"]
    assert body["LogicalResourceId"] == "Schema"


def test_delete_leaves_the_database_alone(
    function_env: None,
    monkeypatch: pytest.MonkeyPatch,
    fresh_database_url: str,
    bucket: ResponseBucket,
    lambda_context: FakeContext,
) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", fresh_database_url)

    migrate_function.handler(request("Delete", bucket.url), lambda_context)

    assert applied(fresh_database_url) == []
    assert bucket.received[0]["body"]["Status"] == "SUCCESS"


def test_a_failure_is_still_answered_with_its_reason(
    function_env: None,
    monkeypatch: pytest.MonkeyPatch,
    bucket: ResponseBucket,
    lambda_context: FakeContext,
) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")

    migrate_function.handler(request("Create", bucket.url), lambda_context)

    body = bucket.received[0]["body"]
    assert body["Status"] == "FAILED" and "DatabaseError" in body["Reason"]


def test_an_event_without_a_response_url_is_refused(
    function_env: None, lambda_context: FakeContext
) -> None:
    answer = migrate_function.handler({"RequestType": "Create"}, lambda_context)
    assert answer["Status"] == "FAILED" and "ResponseURL" in answer["Reason"]
