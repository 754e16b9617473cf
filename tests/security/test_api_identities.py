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


# Three spellings of identity that must never meet --------------------------------------
#
# Each test below has one caller enqueue and a second, differently named caller try to
# read and cancel that job: a shared owner id would show them the first caller's job.

ISSUER = "https://idp.example"


def jwt_event(method: str, path: str, issuer: str, sub: str, **options: Any) -> dict[str, Any]:
    event = http_event(method, path, sub=sub, **options)
    event["requestContext"]["authorizer"]["jwt"]["claims"]["iss"] = issuer
    return event


def iam_event(method: str, path: str, arn: str, **options: Any) -> dict[str, Any]:
    event = http_event(method, path, sub="unused", **options)
    event["requestContext"]["authorizer"] = {
        "iam": {"userArn": arn, "userId": "AROAEXAMPLE:app", "accountId": "123456789012"}
    }
    return event


@pytest.fixture
def send(function_env: None, monkeypatch: pytest.MonkeyPatch, app_url: str, tasks: Any) -> Any:
    """ApiFunction on a tickq_app login; returns (status, decoded body) for an event."""
    from tickq.functions import api

    monkeypatch.setenv("TICKQ_DATABASE_URL", app_url)
    tasks.task("report")(lambda job: None)

    def call(event: dict[str, Any]) -> tuple[int, Any]:
        response = api.handler(event, FakeContext())
        return response["statusCode"], json.loads(response["body"])

    return call


def use_owner_issuer(monkeypatch: pytest.MonkeyPatch, issuer: str | None) -> None:
    if issuer is None:
        monkeypatch.delenv("TICKQ_OWNER_ISSUER", raising=False)
    else:
        monkeypatch.setenv("TICKQ_OWNER_ISSUER", issuer)


def reaches(send: Any, job: dict[str, Any], event_for: Any) -> list[int]:
    """The statuses a second caller gets reading, then cancelling, the first caller's job."""
    return [
        send(event_for("GET", f"/jobs/{job['id']}"))[0],
        send(event_for("POST", f"/jobs/{job['id']}/cancel"))[0],
    ]


@pytest.mark.parametrize("owner_issuer", [None, ISSUER], ids=["no-owner-issuer", "owner-issuer"])
def test_a_uuid_sub_equal_to_another_callers_derived_owner_is_not_that_caller(
    send: Any, monkeypatch: pytest.MonkeyPatch, owner_issuer: str | None
) -> None:
    """(a) Bob's `sub` is a name, so his owner is derived; Mallory's token carries that
    derived id as its `sub`, from the same issuer (the owner issuer, when one is set)."""
    use_owner_issuer(monkeypatch, owner_issuer)
    status, job = send(jwt_event("POST", "/jobs", ISSUER, "bob", body={"type": "report"}))
    assert status == 202
    bobs_owner = job["user_id"]
    assert bobs_owner != "bob"

    mallory = reaches(send, job, lambda m, p: jwt_event(m, p, ISSUER, bobs_owner))
    assert mallory == [404, 404]
    assert send(jwt_event("GET", f"/jobs/{job['id']}", ISSUER, "bob"))[1]["status"] == "queued"


def test_issuer_and_sub_are_not_joined_ambiguously(send: Any) -> None:
    """(b) Issuer "https://a" with `sub` "b:c" and issuer "https://a:b" with `sub` "c" are
    two callers, however a separator would join them."""
    status, job = send(jwt_event("POST", "/jobs", "https://a", "b:c", body={"type": "report"}))
    assert status == 202

    other = reaches(send, job, lambda m, p: jwt_event(m, p, "https://a:b", "c"))
    assert other == [404, 404]


@pytest.mark.parametrize("owner_issuer", [None, ISSUER], ids=["no-owner-issuer", "owner-issuer"])
def test_a_jwt_sub_equal_to_an_iam_principals_owner_is_not_that_principal(
    send: Any, monkeypatch: pytest.MonkeyPatch, owner_issuer: str | None
) -> None:
    """(c) An IAM caller's owner is derived from its ARN; a token whose `sub` is that id is
    someone else."""
    use_owner_issuer(monkeypatch, owner_issuer)
    arn = "arn:aws:iam::123456789012:role/billing"
    status, job = send(iam_event("POST", "/jobs", arn, body={"type": "report"}))
    assert status == 202

    jwt = reaches(send, job, lambda m, p: jwt_event(m, p, ISSUER, job["user_id"]))
    assert jwt == [404, 404]
    assert send(iam_event("GET", f"/jobs/{job['id']}", arn))[0] == 200
