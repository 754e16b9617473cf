"""The caller of an HTTP API request, as the authorizer vouched for it.

JWT authorizers give a `sub` claim; IAM authorization gives a principal ARN. Both map to
the UUID that owns rows in tickq.jobs, one caller always one owner and no two callers one:

* A `sub` in the canonical form of a UUID (lower-case hex, hyphenated, 36 characters, as
  Cognito issues them) is the owner as is, when its issuer is the owner issuer
  (TICKQ_OWNER_ISSUER; unset: any, for a deployment that trusts one issuer).
* Any other `sub` maps through uuid5 of the issuer and the exact text. A `sub` is a
  case-sensitive string, so `urn:uuid:<A>`, `{<A>}`, upper-case or unhyphenated spellings
  of A's id are other callers, with owners of their own, never A. And a UUID `sub` from an
  issuer other than the owner issuer is that issuer's user, not the owner issuer's user of
  the same id.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from uuid import UUID, uuid5

from .errors import Unauthorized

# Fixed namespace for uuid5: changing it would orphan every non-UUID caller's jobs.
OWNER_NAMESPACE = UUID("6f1c3b0e-7d0a-4d57-9a55-2b1f0c9e8a41")


def caller_id(
    request_context: Mapping[str, Any] | None, *, owner_issuer: str | None = None
) -> UUID:
    """The owner id of the request's caller; Unauthorized when the authorizer named none.
    `owner_issuer` defaults to TICKQ_OWNER_ISSUER (empty: every issuer's UUIDs as is)."""
    authorizer = _mapping(request_context, "authorizer")
    claims = _mapping(_mapping(authorizer, "jwt"), "claims")
    sub = claims.get("sub")
    if isinstance(sub, str) and sub:
        issuer = claims.get("iss") if isinstance(claims.get("iss"), str) else ""
        trusted = os.environ.get("TICKQ_OWNER_ISSUER", "") if owner_issuer is None else owner_issuer
        canonical = _canonical_uuid(sub)
        if canonical is not None and (not trusted or issuer == trusted):
            return canonical
        return _derived_owner(f"jwt:{issuer}:{sub}")
    iam = _mapping(authorizer, "iam")
    principal = iam.get("userArn") or iam.get("userId")
    if isinstance(principal, str) and principal:
        return _derived_owner(f"iam:{principal}")
    raise Unauthorized("no caller identity: the request did not pass an authorizer")


def _canonical_uuid(text: str) -> UUID | None:
    """The UUID `text` spells in canonical form, else None (other spellings are names)."""
    try:
        value = UUID(text)
    except ValueError:
        return None
    return value if str(value) == text else None


def _derived_owner(name: str) -> UUID:
    """uuid5 of the caller's name; a name that is not valid Unicode (a lone surrogate from
    an escaped claim) names nobody, rather than crashing the request."""
    try:
        return uuid5(OWNER_NAMESPACE, name)
    except UnicodeEncodeError:
        raise Unauthorized("the caller identity is not valid Unicode text") from None


def _mapping(parent: Any, key: str) -> Mapping[str, Any]:
    """parent[key] when both are mappings, else empty: a malformed event names nobody."""
    value = parent.get(key) if isinstance(parent, Mapping) else None
    return value if isinstance(value, Mapping) else {}
