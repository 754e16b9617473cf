"""The caller of an HTTP API request, as the authorizer vouched for it.

JWT authorizers give an issuer (`iss`) and a subject (`sub`); IAM authorization gives a
principal ARN. Each caller maps to the UUID that owns its rows in tickq.jobs, one caller
always one owner and no two callers one owner: `owner_id` says how, and why.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Literal
from uuid import UUID, uuid5

from tickq.functions.http.errors import Unauthorized

# Fixed namespace for uuid5: changing it would orphan every derived owner's jobs.
OWNER_NAMESPACE = UUID("6f1c3b0e-7d0a-4d57-9a55-2b1f0c9e8a41")
# The one issuer whose UUID subjects are owners as they are (unset or empty: none).
OWNER_ISSUER_SETTING = "TICKQ_OWNER_ISSUER"


def caller_id(
    request_context: Mapping[str, Any] | None, *, owner_issuer: str | None = None
) -> UUID:
    """The owner id of the request's caller; Unauthorized when the authorizer named none.
    `owner_issuer` defaults to TICKQ_OWNER_ISSUER (empty: no issuer's UUIDs as they are)."""
    claims = jwt_claims(request_context)
    sub = claims.get("sub")
    if isinstance(sub, str) and sub:
        trusted = os.environ.get(OWNER_ISSUER_SETTING, "") if owner_issuer is None else owner_issuer
        return owner_id("jwt", jwt_issuer(claims), sub, uuid_issuer=trusted.strip())
    principal = iam_principal(request_context)
    if principal is not None:
        return owner_id("iam", principal)
    raise Unauthorized("no caller identity: the request did not pass an authorizer")


def owner_id(kind: Literal["jwt", "iam"], *names: str | None, uuid_issuer: str = "") -> UUID:
    """The owner of a caller: ("jwt", issuer, subject) or ("iam", principal ARN or id).

    Owners are derived, not taken from text a caller may choose, so that two callers never
    meet in one owner:

    * The owner is uuid5 (fixed namespace) of the UTF-8 bytes of the compact JSON array
      `["jwt", issuer, subject]` or `["iam", principal]`: non-ASCII written as is, no
      spaces, a missing issuer as null. JSON quotes and escapes each part, so no pair of
      parts can be re-cut into another (issuer "https://a" with subject "b:c" and issuer
      "https://a:b" with subject "c" are two arrays), and the kind keeps IAM principals
      and JWT callers apart.
    * A JWT subject in the canonical form of a UUID (lower-case hexadecimal, hyphenated,
      36 characters, as Cognito issues them) is the owner as it is, but only from
      `uuid_issuer` (TICKQ_OWNER_ISSUER; empty: from no issuer) and only when it is not a
      version-5 UUID. Every derived owner is a version-5 UUID, so a subject taken as is
      can equal none of them, whoever chose it; and only one issuer's subjects are taken
      as they are, so two issuers' users with one id are two owners.
    * Anything else is a name, case-sensitive and exact: `urn:uuid:<A>`, `{<A>}` or the
      upper-case spelling of A's id is another caller with an owner of its own.

    Text that is not valid Unicode (a lone surrogate from an escaped claim) names nobody:
    Unauthorized, rather than a crash.
    """
    if kind == "jwt" and uuid_issuer and len(names) == 2 and names[0] == uuid_issuer:
        as_is = _canonical_uuid(names[1])
        if as_is is not None and as_is.version != 5:
            return as_is
    name = json.dumps([kind, *names], ensure_ascii=False, separators=(",", ":"))
    try:
        return uuid5(OWNER_NAMESPACE, name)
    except UnicodeEncodeError:
        raise Unauthorized("the caller identity is not valid Unicode text") from None


def jwt_claims(request_context: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The JWT authorizer's claims; empty when the request has none."""
    return _mapping(_mapping(_mapping(request_context, "authorizer"), "jwt"), "claims")


def jwt_issuer(claims: Mapping[str, Any]) -> str | None:
    """The token's issuer (`iss`), None when it has none; Unauthorized when it is not text
    (a number and its digits as text must not be one issuer)."""
    issuer = claims.get("iss")
    if issuer is None or isinstance(issuer, str):
        return issuer
    raise Unauthorized("the token's issuer (iss) is not text")


def iam_principal(request_context: Mapping[str, Any] | None) -> str | None:
    """The IAM caller's principal ARN (else its principal id); None without IAM auth."""
    return iam_arn(request_context) or _text(_iam(request_context).get("userId"))


def iam_arn(request_context: Mapping[str, Any] | None) -> str | None:
    """The IAM caller's principal ARN; None without IAM auth or an ARN."""
    return _text(_iam(request_context).get("userArn"))


def _iam(request_context: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return _mapping(_mapping(request_context, "authorizer"), "iam")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _canonical_uuid(text: str | None) -> UUID | None:
    """The UUID `text` spells in canonical form, else None (other spellings are names)."""
    if text is None:
        return None
    try:
        value = UUID(text)
    except ValueError:
        return None
    return value if str(value) == text else None


def _mapping(parent: Any, key: str) -> Mapping[str, Any]:
    """parent[key] when both are mappings, else empty: a malformed event names nobody."""
    value = parent.get(key) if isinstance(parent, Mapping) else None
    return value if isinstance(value, Mapping) else {}
