"""The caller of an HTTP API request, as the authorizer vouched for it.

JWT authorizers give a `sub` claim; IAM authorization gives a principal ARN. Both map to
the UUID that owns rows in tickq.jobs: a `sub` that is a UUID (Cognito) is used as is,
anything else maps deterministically through uuid5, so one caller is always one owner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID, uuid5

from .errors import Unauthorized

# Fixed namespace for uuid5: changing it would orphan every non-UUID caller's jobs.
OWNER_NAMESPACE = UUID("6f1c3b0e-7d0a-4d57-9a55-2b1f0c9e8a41")


def caller_id(request_context: Mapping[str, Any] | None) -> UUID:
    """The owner id of the request's caller; Unauthorized when the authorizer named none."""
    authorizer = _mapping(request_context, "authorizer")
    claims = _mapping(_mapping(authorizer, "jwt"), "claims")
    sub = claims.get("sub")
    if isinstance(sub, str) and sub:
        try:
            return UUID(sub)
        except ValueError:
            issuer = claims.get("iss") if isinstance(claims.get("iss"), str) else ""
            return _derived_owner(f"jwt:{issuer}:{sub}")
    iam = _mapping(authorizer, "iam")
    principal = iam.get("userArn") or iam.get("userId")
    if isinstance(principal, str) and principal:
        return _derived_owner(f"iam:{principal}")
    raise Unauthorized("no caller identity: the request did not pass an authorizer")


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
