"""The HTTP API with two identities: every route is scoped to the caller by row-level
security, so Bob can neither read, list, cancel nor retry Alice's jobs, nor learn of them."""

from __future__ import annotations

import json
from typing import Any
from uuid import uuid4

import psycopg
import pytest

from tests.functions.conftest import FakeContext, Invoke, http_event

ALICE, BOB = str(uuid4()), str(uuid4())


@pytest.fixture
def call_api(
    function_env: None,
    monkeypatch: pytest.MonkeyPatch,
    app_url: str,
    lambda_context: FakeContext,
) -> Invoke:
    """ApiFunction logged in as a real tickq_app member; returns (status, decoded body)."""
    from tickq.functions import api

    monkeypatch.setenv("TICKQ_DATABASE_URL", app_url)

    def call(method: str, path: str, **options: Any) -> tuple[int, Any]:
        response = api.handler(http_event(method, path, **options), lambda_context)
        return response["statusCode"], json.loads(response["body"])

    return call


@pytest.fixture
def alices_job(call_api: Invoke, tasks: object) -> str:
    status, job = call_api(
        "POST", "/jobs", body={"type": "report", "idempotency_key": "k"}, sub=ALICE
    )
    assert status == 202
    return str(job["id"])


def state(conn: psycopg.Connection) -> list[tuple[object, ...]]:
    return conn.execute("select id, status, attempts, updated_at from tickq.jobs").fetchall()


@pytest.mark.parametrize(
    ("method", "suffix"), [("GET", ""), ("POST", "/cancel"), ("POST", "/retry")]
)
def test_another_caller_gets_404_for_every_route_and_changes_nothing(
    call_api: Invoke, conn: psycopg.Connection, alices_job: str, method: str, suffix: str
) -> None:
    before = state(conn)
    status, body = call_api(method, f"/jobs/{alices_job}{suffix}", sub=BOB)
    assert (status, body["error"]) == (404, "JobNotFound")
    assert state(conn) == before


def test_another_caller_lists_nothing_and_its_same_key_is_a_new_job(
    call_api: Invoke, alices_job: str
) -> None:
    _, page = call_api("GET", "/jobs", sub=BOB)
    status, job = call_api(
        "POST", "/jobs", body={"type": "report", "idempotency_key": "k"}, sub=BOB
    )
    assert page["jobs"] == []
    assert status == 202 and job["id"] != alices_job


def test_owner_in_the_body_is_refused_so_no_one_enqueues_for_someone_else(
    call_api: Invoke, conn: psycopg.Connection, tasks: object
) -> None:
    status, body = call_api("POST", "/jobs", body={"type": "report", "user_id": ALICE}, sub=BOB)
    assert status == 400 and "user_id" in body["message"]
    assert state(conn) == []


def test_the_owner_still_reaches_its_job(call_api: Invoke, alices_job: str) -> None:
    status, job = call_api("POST", f"/jobs/{alices_job}/cancel", sub=ALICE)
    assert (status, job["status"]) == (200, "cancelled")


@pytest.mark.parametrize(
    "claims", [{"sub": "user-\ud800"}, {"sub": "user", "iss": "https://idp/\udcff"}]
)
def test_a_claim_that_is_not_valid_unicode_is_unauthorized_not_a_crash(
    call_api: Invoke, conn: psycopg.Connection, claims: dict[str, str]
) -> None:
    event = http_event("GET", "/jobs", sub=claims["sub"])
    event["requestContext"]["authorizer"]["jwt"]["claims"].update(claims)
    from tickq.functions import api

    response = api.handler(event, FakeContext())
    assert response["statusCode"] == 401, response
    assert "Unicode" in json.loads(response["body"])["message"]
