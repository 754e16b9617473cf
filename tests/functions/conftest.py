"""Fixtures for the Lambda handlers: real PostgreSQL logins, moto for AWS, sample events.

Each handler runs as it would in Lambda: environment variables point it at a database
login (a member of tickq_worker, or of tickq_app for the API), and AWS calls go to moto.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import boto3
import pytest
from moto import mock_aws

from queue_core import Registry, registry
from tickq.functions import db
from tickq.functions.aws import reset as reset_aws_clients
from tickq.functions.aws import session
from tickq.infra.local.lambda_context import LocalContext

EVENTS = Path(__file__).resolve().parents[2] / "infra" / "events"
# The sample events' issuer (infra/events/api-*.json). The handler tests run as a deployment
# that names it TICKQ_OWNER_ISSUER, as the template does with JwtIssuer: its UUID `sub`s
# are owners as they are.
SAMPLE_ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_EXAMPLE"
FUNCTION_ENV = (
    "TICKQ_DATABASE_URL",
    "TICKQ_DB_SECRET_ARN",
    "TICKQ_TASK_MODULES",
    "TICKQ_QUEUES",
    "TICKQ_BATCH_SIZE",
    "TICKQ_CONCURRENCY",
    "TICKQ_LEASE_SECONDS",
    "TICKQ_PREPARE_THRESHOLD",
    "TICKQ_API_STATEMENT_TIMEOUT_MS",
    "TICKQ_OWNER_ISSUER",
    "TICKQ_SAFETY_MARGIN_MS",
    "TICKQ_MAX_FANOUT",
    "TICKQ_EVENT_BUS",
    "TICKQ_KICK_FUNCTION",
    "TICKQ_MAX_ABANDONED_HANDLERS",
)


def sample_event(name: str) -> Any:
    """A copy of infra/events/<name>.json, the file `sam local invoke -e` would use."""
    return json.loads((EVENTS / f"{name}.json").read_text(encoding="utf-8"))


def FakeContext(remaining_ms: int = 60_000, name: str = "tickq-tick") -> LocalContext:
    """The one local Lambda context, on a clock that stands still: time passes only by
    `spend(ms)`."""
    return LocalContext(name, timeout_seconds=remaining_ms / 1000, clock=lambda: 0.0)


@pytest.fixture
def lambda_context() -> LocalContext:
    return FakeContext()


@pytest.fixture
def function_env(
    monkeypatch: pytest.MonkeyPatch, clean_tables: None, tasks: Registry
) -> Iterator[None]:
    """No tickq setting leaks in from the caller, nor handlers other suites registered in the
    process-wide registry; the per-environment connection is reset."""
    for name in FUNCTION_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TICKQ_OWNER_ISSUER", SAMPLE_ISSUER)
    db.discard()
    yield
    db.discard()


@pytest.fixture
def as_worker(function_env: None, monkeypatch: pytest.MonkeyPatch, worker_login_url: str) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", worker_login_url)


@pytest.fixture
def as_app(function_env: None, monkeypatch: pytest.MonkeyPatch, app_login_url: str) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", app_login_url)


@pytest.fixture
def tasks(monkeypatch: pytest.MonkeyPatch) -> Registry:
    """The process-wide registry, emptied for this test and restored after it."""
    monkeypatch.setattr(registry, "tasks", {})
    return registry


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto for every AWS call, Lambda included (without Docker); fresh clients per test."""
    from aws_lambda_powertools.utilities import parameters

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    reset_aws_clients()
    parameters.clear_caches()
    parameters.base.DEFAULT_PROVIDERS.clear()
    with mock_aws(config={"lambda": {"use_docker": False}}):
        yield
    reset_aws_clients()
    parameters.clear_caches()
    parameters.base.DEFAULT_PROVIDERS.clear()


def lambda_function(name: str) -> str:
    """A Lambda function `name` in moto (never run: invokes are only recorded); its ARN."""
    iam = boto3.client("iam")
    role = iam.create_role(
        RoleName="tick-role",
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}),
    )["Role"]["Arn"]
    created = boto3.client("lambda").create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role,
        Handler="tickq.functions.tick.handler",
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
    )
    return str(created["FunctionArn"])


def record_invokes() -> list[dict[str, Any]]:
    """Every Lambda invoke the functions make from now on: its target and payload."""
    calls: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        calls.append({"function": params["FunctionName"], **json.loads(params["Payload"])})

    session().events.register("provide-client-params.lambda.Invoke", record)
    return calls


def http_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    sub: str | UUID | None = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    raw_body: str | None = None,
) -> dict[str, Any]:
    """An HTTP API (v2) event shaped like infra/events/api-post-job.json."""
    event: dict[str, Any] = copy.deepcopy(sample_event("api-post-job"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["routeKey"] = event["requestContext"]["routeKey"] = f"{method} {path}"
    event.pop("body", None)
    if raw_body is not None:
        event["body"] = raw_body
    elif body is not None:
        event["body"] = json.dumps(body)
    if query:
        event["queryStringParameters"] = query
        event["rawQueryString"] = "&".join(f"{k}={v}" for k, v in query.items())
    event["headers"].update(headers or {})
    if sub is None:
        event["requestContext"].pop("authorizer", None)
    else:
        event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = str(sub)
    return event


Invoke = Callable[..., tuple[int, Any]]


@pytest.fixture
def call_api(as_app: None, lambda_context: FakeContext) -> Invoke:
    """Send an HTTP API event to ApiFunction; returns (status, decoded JSON body)."""
    from tickq.functions import api

    def call(method: str, path: str, **options: Any) -> tuple[int, Any]:
        response = api.handler(http_event(method, path, **options), lambda_context)
        body = response.get("body")
        return response["statusCode"], json.loads(body) if body else None

    return call
