"""The operator allow-list and the per-queue overview: plain values, no database."""

from __future__ import annotations

import base64

import pytest

from queue_core import Status
from queue_core.store.port import StatsRow
from tickq.functions.http.ui import QueueOverview, is_operator, queue_overview
from tickq.infra.local.serve import DevIdentity, http_api_event, parse_user, response_parts

OWNER = "1a2ed10b-6c47-5e33-95f1-49a6fa430255"


@pytest.mark.parametrize(
    "groups",
    ["[readers tickq-operators]", '["readers", "tickq-operators"]', ["tickq-operators"]],
    ids=["flattened", "json-text", "list"],
)
def test_operator_by_default_group_in_the_cognito_groups_claim(groups: object) -> None:
    assert is_operator({"sub": "olivia", "cognito:groups": groups}, {})


@pytest.mark.parametrize(
    "groups",
    ["tickq-operators", "[readers,tickq-operators]", "readers,tickq-operators", 7, {"a": 1}],
)
def test_a_groups_claim_that_is_not_a_list_of_names_grants_nothing(groups: object) -> None:
    assert not is_operator({"sub": "mallory", "cognito:groups": groups}, {})


ISSUER = "https://idp.example"


def test_operator_by_the_one_named_claim_only() -> None:
    env = {"TICKQ_OPERATORS": f"{ISSUER}|bob, {ISSUER}|olivia"}
    assert is_operator({"iss": ISSUER, "sub": "olivia"}, env)
    # Another claim holding the name, or the owner id derived from the token, is not enough.
    assert not is_operator({"iss": ISSUER, "sub": "mallory", "username": "olivia"}, env)
    assert not is_operator({"iss": ISSUER, "sub": "mallory", "cognito:username": "olivia"}, env)
    assert not is_operator({"iss": ISSUER, "sub": "x"}, {"TICKQ_OPERATORS": f"{ISSUER}|{OWNER}"})
    assert is_operator(
        {"iss": ISSUER, "sub": "x", "username": "olivia"},
        {**env, "TICKQ_OPERATOR_CLAIM": "username"},
    )


def test_not_an_operator_without_name_or_group() -> None:
    claims = {"iss": ISSUER, "sub": "alice", "cognito:groups": ["readers"]}
    assert not is_operator(claims, {"TICKQ_OPERATORS": f"{ISSUER}|olivia"})


def test_configured_groups_and_groups_claim_replace_the_defaults() -> None:
    claims = {"sub": "olivia", "cognito:groups": ["tickq-operators"]}
    assert not is_operator(claims, {"TICKQ_OPERATOR_GROUPS": "sre"})
    assert not is_operator({"groups": ["sre"]}, {"TICKQ_OPERATOR_GROUPS": "sre"})
    env = {"TICKQ_OPERATOR_GROUPS": "sre", "TICKQ_OPERATOR_GROUPS_CLAIM": "groups"}
    assert is_operator({"groups": ["sre"]}, env)


def test_queue_overview_sums_types_and_keeps_the_oldest_runnable_age() -> None:
    rows = [
        StatsRow("bulk", "embed", Status.QUEUED, 5, 12.0),
        StatsRow("default", "embed", Status.QUEUED, 2, 3.5),
        StatsRow("default", "embed", Status.DEAD, 1, None),
        StatsRow("default", "reindex", Status.RETRYING, 4, 40.0),
        StatsRow("default", "reindex", Status.RUNNING, 3, None),
        StatsRow("default", "reindex", Status.SUCCEEDED, 10, None),
        StatsRow("default", "reindex", Status.WAITING, 7, None),
    ]
    assert queue_overview(rows) == [
        QueueOverview("bulk", 5, 12.0, 0, 0, 0, 0, 5),
        QueueOverview("default", 6, 40.0, 7, 3, 4, 1, 27),
    ]


def test_dev_identity_maps_a_name_to_a_stable_owner_and_a_uuid_to_itself() -> None:
    assert DevIdentity("alice").owner_id() == DevIdentity("alice").owner_id()
    assert DevIdentity("alice").owner_id() != DevIdentity("bob").owner_id()
    cognito_style = "0d3f5a9e-2b6c-4e57-9c1a-7f2e8b4d6a10"  # a version-4 UUID
    assert str(DevIdentity(cognito_style).owner_id()) == cognito_style
    # A version-5 UUID could be someone's derived owner: it is a name like any other.
    assert str(DevIdentity(OWNER).owner_id()) != OWNER


@pytest.mark.parametrize("raw", ["", "two words", "semi;colon", "x" * 129])
def test_a_bad_user_is_refused_with_what_is_allowed(raw: str) -> None:
    with pytest.raises(ValueError, match="UUID or a name"):
        parse_user(raw)


def test_http_request_becomes_a_payload_2_event_with_the_dev_identity() -> None:
    event = http_api_event(
        method="POST",
        target="/jobs?status=dead&type=a&type=b",
        headers={
            "Host": "127.0.0.1:8000",
            "Cookie": "a=1; b=2",
            "Content-Type": "application/json",
        },
        body=b'{"type": "embed"}',
        identity=DevIdentity("alice", operator_group="ops"),
    )
    assert event["version"] == "2.0"
    assert event["rawPath"] == "/jobs"
    assert event["queryStringParameters"] == {"status": "dead", "type": "a,b"}
    assert event["cookies"] == ["a=1", "b=2"]
    assert event["headers"]["content-type"] == "application/json"
    assert event["requestContext"]["http"]["method"] == "POST"
    claims = event["requestContext"]["authorizer"]["jwt"]["claims"]
    assert (claims["sub"], claims["cognito:groups"]) == ("alice", "[ops]")
    assert (event["body"], event["isBase64Encoded"]) == ('{"type": "embed"}', False)


def test_binary_bodies_travel_base64_both_ways() -> None:
    event = http_api_event(
        method="PUT",
        target="/x",
        headers={"Content-Type": "application/octet-stream"},
        body=b"\xff\x00",
        identity=DevIdentity("alice"),
    )
    assert event["isBase64Encoded"] and base64.b64decode(event["body"]) == b"\xff\x00"
    status, headers, body = response_parts(
        {
            "statusCode": 201,
            "headers": {"X-A": "1"},
            "cookies": ["s=1"],
            "body": base64.b64encode(b"\x01").decode(),
            "isBase64Encoded": True,
        }
    )
    assert (status, body) == (201, b"\x01")
    assert ("X-A", "1") in headers and ("Set-Cookie", "s=1") in headers
