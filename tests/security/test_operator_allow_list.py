"""The operator allow-list names callers by issuer and subject (or IAM principal ARN): the
same subject from another trusted issuer is someone else, and is no operator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from queue_core import ConfigurationError
from tests.functions.conftest import FakeContext, http_event
from tickq.functions.http.ui import Operators, caller_is_operator, is_operator, operators
from tickq.infra.local.serve import DEV_ISSUER, DevIdentity

ROOT = Path(__file__).resolve().parents[2]
A, B = "https://a.example", "https://b.example"
ARN = "arn:aws:iam::123456789012:role/ops"


def token(iss: str | None, sub: str, **claims: Any) -> dict[str, Any]:
    return {"sub": sub, **claims} if iss is None else {"iss": iss, "sub": sub, **claims}


def test_a_subject_is_an_operator_only_from_the_issuer_it_is_listed_with() -> None:
    env = {"TICKQ_OPERATORS": f"{A}|olivia, {B}|bob"}
    assert is_operator(token(A, "olivia"), env)
    assert not is_operator(token(B, "olivia"), env)
    assert not is_operator(token(None, "olivia"), env)
    assert not is_operator(token(A, "bob"), env)
    assert is_operator(token(B, "bob"), env)


def test_subjects_may_hold_the_separator_and_the_claim_may_be_another() -> None:
    env = {"TICKQ_OPERATORS": f"{A}|auth0|42"}
    assert is_operator(token(A, "auth0|42"), env)
    assert not is_operator(token(f"{A}|auth0", "42"), env)
    named = {"TICKQ_OPERATORS": f"{A}|olivia", "TICKQ_OPERATOR_CLAIM": "username"}
    assert is_operator(token(A, "x", username="olivia"), named)
    assert not is_operator(token(B, "x", username="olivia"), named)
    assert not is_operator(token(A, "olivia"), named)


def test_the_allow_list_is_parsed_into_issuer_and_subject_pairs_and_arns() -> None:
    parsed = operators(f" {A}|olivia ,{ARN},,{B}|auth0|42 ")
    assert parsed == Operators(
        tokens=frozenset({(A, "olivia"), (B, "auth0|42")}), principals=frozenset({ARN})
    )
    assert operators(None) == operators("") == Operators(frozenset(), frozenset())


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ("olivia", "names no issuer: write '<issuer>|olivia'"),
        (f"{A}|olivia, bob", "'bob' names no issuer"),
        ("0d3f5a9e-2b6c-4e57-9c1a-7f2e8b4d6a10", "names no issuer"),
        (f"{A}|", "both non-empty"),
        ("|olivia", "both non-empty"),
        (f"{A} | olivia", "without spaces around"),
        ("arn:aws:iam", "names no issuer"),
    ],
)
def test_an_entry_without_its_issuer_is_a_configuration_error(setting: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match="TICKQ_OPERATORS entry") as refused:
        operators(setting)
    assert says in str(refused.value)
    with pytest.raises(ConfigurationError):
        is_operator(token(A, "olivia"), {"TICKQ_OPERATORS": setting})


def test_a_function_with_a_bad_allow_list_does_not_start() -> None:
    env = {**os.environ, "TICKQ_OPERATORS": "olivia"}
    done = subprocess.run(
        [sys.executable, "-c", "import tickq.functions.api"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "TICKQ_OPERATORS entry 'olivia' names no issuer" in done.stderr


def test_an_iam_principal_is_an_operator_by_its_arn_and_a_jwt_of_that_text_is_not() -> None:
    env = {"TICKQ_OPERATORS": ARN}
    assert caller_is_operator({"authorizer": {"iam": {"userArn": ARN}}}, env)
    assert not caller_is_operator({"authorizer": {"iam": {"userArn": ARN + "x"}}}, env)
    assert not caller_is_operator({"authorizer": {"iam": {"userId": ARN}}}, env)
    assert not caller_is_operator({"authorizer": {"jwt": {"claims": token(A, ARN)}}}, env)
    assert not caller_is_operator(None, env)


def test_groups_count_only_from_the_groups_issuer_when_one_is_set() -> None:
    claims = {"cognito:groups": ["tickq-operators"], "sub": "olivia"}
    assert is_operator({**claims, "iss": B}, {})
    pinned = {"TICKQ_OPERATOR_GROUPS_ISSUER": A}
    assert is_operator({**claims, "iss": A}, pinned)
    assert not is_operator({**claims, "iss": B}, pinned)
    assert not is_operator(claims, pinned)
    # An issuer-and-subject entry is its own grant, whatever the groups' issuer.
    assert is_operator(token(B, "bob"), {**pinned, "TICKQ_OPERATORS": f"{B}|bob"})


def test_the_dev_server_identity_with_its_issuer_is_an_operator() -> None:
    env = {"TICKQ_OPERATORS": f"{DEV_ISSUER}|olivia"}
    assert is_operator(DevIdentity("olivia").claims(), env)
    assert not is_operator(DevIdentity("mallory").claims(), env)


# Through ApiFunction -----------------------------------------------------------------------


@pytest.fixture
def ask(function_env: None, monkeypatch: pytest.MonkeyPatch) -> Any:
    """ApiFunction with Olivia of issuer A on the allow-list; (status, body) of a request
    from `sub` of `iss`. Neither /me nor a refused /admin route reaches the database."""
    from tickq.functions import api

    monkeypatch.setenv("TICKQ_OPERATORS", f"{A}|olivia")
    monkeypatch.setenv("TICKQ_OPERATOR_GROUPS", "nobody-has-this-group")

    def call(method: str, path: str, iss: str, sub: str) -> tuple[int, Any]:
        event = http_event(method, path, sub=sub)
        event["requestContext"]["authorizer"]["jwt"]["claims"]["iss"] = iss
        response = api.handler(event, FakeContext())
        return response["statusCode"], json.loads(response["body"])

    return call


def test_olivia_of_another_issuer_is_no_operator_through_the_api(ask: Any) -> None:
    assert ask("GET", "/me", A, "olivia")[1]["operator"] is True
    assert ask("GET", "/me", B, "olivia")[1]["operator"] is False
    for method, path in (("GET", "/admin/stats"), ("POST", "/admin/queues/default/pause")):
        status, body = ask(method, path, B, "olivia")
        assert (status, body["error"]) == (403, "NotOperator"), (method, path)
