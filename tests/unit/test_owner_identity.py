"""The owner a caller maps to (functions/http/identity.py), without a database: one caller one
owner, and no two callers one owner, however their issuer, subject or principal is spelled.
The same attacks through the HTTP API are in tests/security/test_api_identities.py."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4, uuid5

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickq.functions.http.errors import Unauthorized
from tickq.functions.http.identity import OWNER_NAMESPACE, caller_id, owner_id

ISSUER = "https://idp.example"
ARN = "arn:aws:iam::123456789012:role/billing"


def jwt(sub: str, iss: str | None = ISSUER, **claims: Any) -> dict[str, Any]:
    found = {"sub": sub, **claims} if iss is None else {"sub": sub, "iss": iss, **claims}
    return {"authorizer": {"jwt": {"claims": found}}}


def iam(arn: str | None = ARN, user_id: str | None = None) -> dict[str, Any]:
    principal = {k: v for k, v in (("userArn", arn), ("userId", user_id)) if v is not None}
    return {"authorizer": {"iam": principal}}


def test_the_encoding_is_pinned_since_changing_it_orphans_every_derived_owners_jobs() -> None:
    assert caller_id(jwt("auth0|42"), owner_issuer="") == uuid5(
        OWNER_NAMESPACE, '["jwt","https://idp.example","auth0|42"]'
    )
    assert caller_id(jwt("bob", iss=None), owner_issuer="") == uuid5(
        OWNER_NAMESPACE, '["jwt",null,"bob"]'
    )
    assert caller_id(iam()) == uuid5(
        OWNER_NAMESPACE, '["iam","arn:aws:iam::123456789012:role/billing"]'
    )
    assert caller_id(jwt("ü"), owner_issuer="") == uuid5(
        OWNER_NAMESPACE, '["jwt","https://idp.example","ü"]'
    )


def test_a_uuid_sub_is_the_owner_only_from_the_owner_issuer() -> None:
    alice = uuid4()
    assert caller_id(jwt(str(alice)), owner_issuer=ISSUER) == alice
    assert caller_id(jwt(str(alice), iss="https://other.example"), owner_issuer=ISSUER) != alice
    assert caller_id(jwt(str(alice), iss=None), owner_issuer=ISSUER) != alice
    # No owner issuer: every subject is a name of its issuer, UUIDs too.
    assert caller_id(jwt(str(alice)), owner_issuer="") != alice


def test_the_owner_issuer_comes_from_tickq_owner_issuer(monkeypatch: pytest.MonkeyPatch) -> None:
    alice = uuid4()
    monkeypatch.delenv("TICKQ_OWNER_ISSUER", raising=False)
    assert caller_id(jwt(str(alice))) != alice
    monkeypatch.setenv("TICKQ_OWNER_ISSUER", ISSUER)
    assert caller_id(jwt(str(alice))) == alice
    monkeypatch.setenv("TICKQ_OWNER_ISSUER", "")
    assert caller_id(jwt(str(alice))) != alice


def test_no_uuid_sub_taken_as_is_can_be_a_derived_owner() -> None:
    """Every derived owner is a version-5 UUID; a version-5 `sub`, even from the owner
    issuer, is a name, so a token carrying another caller's derived owner is not them."""
    derived = [
        caller_id(jwt("bob"), owner_issuer=ISSUER),
        caller_id(jwt("carol", iss="https://other.example"), owner_issuer=ISSUER),
        caller_id(iam()),
        caller_id(iam(arn=None, user_id="AROAEXAMPLE:app")),
    ]
    for owner in derived:
        assert owner.version == 5
        assert caller_id(jwt(str(owner)), owner_issuer=ISSUER) != owner


def test_other_spellings_of_a_uuid_are_other_callers() -> None:
    alice = uuid4()
    owners = {
        caller_id(jwt(spelling), owner_issuer=ISSUER)
        for spelling in (str(alice), f"urn:uuid:{alice}", f"{{{alice}}}", str(alice).upper())
    }
    assert len(owners) == 4 and alice in owners


def test_issuer_and_subject_split_at_another_point_are_another_caller() -> None:
    one = caller_id(jwt("b:c", iss="https://a"), owner_issuer="")
    two = caller_id(jwt("c", iss="https://a:b"), owner_issuer="")
    assert one != two


def test_an_iam_principal_and_a_jwt_of_the_same_text_are_two_callers() -> None:
    assert caller_id(iam()) != caller_id(jwt(ARN), owner_issuer="")
    assert caller_id(iam()) != caller_id(jwt(ARN, iss=None), owner_issuer="")
    assert caller_id(iam()) != caller_id(jwt(ARN, iss="iam"), owner_issuer="")


def test_a_missing_issuer_and_an_empty_one_are_two_callers_and_a_non_text_one_none() -> None:
    assert caller_id(jwt("bob", iss=None)) != caller_id(jwt("bob", iss=""))
    with pytest.raises(Unauthorized, match="issuer"):
        caller_id({"authorizer": {"jwt": {"claims": {"sub": "bob", "iss": 7}}}})


# Any text: separators, quotes, backslashes, escapes, the empty string.
TEXT = st.text(alphabet=st.sampled_from(["a", ":", "|", '"', "\\", ",", "[", "]", "\n", "é"]))


@settings(deadline=None)  # a shared, noisy machine: no time limit per example
@given(issuer=TEXT, subject=TEXT, cut=st.integers(min_value=0))
def test_no_two_cuts_of_the_same_text_into_issuer_and_subject_meet(
    issuer: str, subject: str, cut: int
) -> None:
    joined = issuer + subject
    cut %= len(joined) + 1
    other = (joined[:cut], joined[cut:])
    if other != (issuer, subject):
        assert owner_id("jwt", issuer, subject) != owner_id("jwt", *other)
    assert owner_id("jwt", issuer, subject) != owner_id("iam", joined)


@settings(deadline=None)  # a shared, noisy machine: no time limit per example
@given(kind=st.sampled_from(["jwt", "iam"]), name=TEXT)
def test_the_derivation_is_stable_and_always_version_5(kind: Any, name: str) -> None:
    names = (ISSUER, name) if kind == "jwt" else (name,)
    owner = owner_id(kind, *names)
    assert owner == owner_id(kind, *names) and owner.version == 5
    assert isinstance(owner, UUID)
