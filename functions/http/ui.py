"""The job list page and its operator view, served by ApiFunction next to the /jobs routes.

The page is static HTML and plain JavaScript that calls the same HTTP API as any client,
so it can do nothing a caller could not do with curl. The operator view shows counts
across users; it is open only to the callers of the allow-list:

* TICKQ_OPERATORS, comma-separated entries, each `<issuer>|<subject>`: a JWT whose `iss`
  is that issuer and whose TICKQ_OPERATOR_CLAIM claim (default `sub`) is that subject,
  both exact (split at the first `|`: issuers have none, subjects such as `auth0|42` may);
  or an IAM principal ARN (`arn:...`), an IAM caller whose principal ARN it is. An entry
  of neither form is refused when the module loads, since a subject without its issuer
  would name the users of that subject of every trusted issuer.
* A group of TICKQ_OPERATOR_GROUPS (default "tickq-operators") in the claim named by
  TICKQ_OPERATOR_GROUPS_CLAIM (default `cognito:groups`), only in tokens of
  TICKQ_OPERATOR_GROUPS_ISSUER when that is set.

One named claim each: a user name or an owner UUID never stands in for another claim.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import cache, lru_cache
from http import HTTPStatus
from importlib import resources
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router

from queue_core import ConfigurationError, Status, TickqError
from queue_core.config import comma_list
from queue_core.model.fairness import GroupStats
from queue_core.store.port import StatsRow
from tickq.functions.http.identity import caller_id, iam_arn, jwt_claims
from tickq.functions.runtime import store

DEFAULT_OPERATOR_GROUPS = "tickq-operators"
DEFAULT_OPERATOR_CLAIM = "sub"
DEFAULT_GROUPS_CLAIM = "cognito:groups"
SHOWN_GROUPS = 50  # fairness groups in the operator view, the longest-waiting first
ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "charts.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "time.js": "text/javascript; charset=utf-8",
}
# The page loads only its own assets and talks only to its own origin.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Assets change with each deploy; revalidating is cheap next to a stale page.
    "Cache-Control": "no-cache",
}

OPERATORS_SETTING = "TICKQ_OPERATORS"
GROUPS_ISSUER_SETTING = "TICKQ_OPERATOR_GROUPS_ISSUER"

router = Router()


class NotOperator(TickqError):
    """Only operators may see every user's queues."""


@dataclass(frozen=True, slots=True)
class QueueOverview:
    """One queue as an operator sees it, across all users."""

    queue: str
    depth: int  # waiting: queued or retrying
    oldest_runnable_seconds: float | None
    waiting: int  # for parent jobs (dependencies)
    running: int
    retrying: int
    dead: int
    total: int


@router.get("/")
def index() -> Response:
    return _static("index.html", "text/html; charset=utf-8")


@router.get("/ui")
def page() -> Response:
    return _static("index.html", "text/html; charset=utf-8")


@router.get("/ui/<asset>")
def asset(asset: str) -> Response:
    if asset == "config.json":
        # Where the page starts its own sign-in (TICKQ_SIGN_IN_URL); it takes a token only
        # from the answer to that flow, checked by a one-use state.
        return _json(HTTPStatus.OK, {"sign_in_url": os.environ.get("TICKQ_SIGN_IN_URL") or None})
    if asset not in ASSETS:
        return _json(HTTPStatus.NOT_FOUND, {"error": "NotFound", "message": "no such asset"})
    return _static(asset, ASSETS[asset])


@router.get("/me")
def me() -> Response:
    claims = _claims()
    owner = _owner()
    return _json(
        HTTPStatus.OK,
        {
            "user_id": owner,
            "name": claims.get("username") or claims.get("cognito:username") or claims.get("sub"),
            "operator": caller_is_operator(_request_context(), os.environ),
        },
    )


@router.get("/admin/stats")
def admin_stats() -> Response:
    if not caller_is_operator(_request_context(), os.environ):
        raise NotOperator()
    queues = queue_overview(store().stats_all_users())
    groups = starved_groups(store().group_stats_all_users())
    return _json(
        HTTPStatus.OK,
        {"queues": [asdict(q) for q in queues], "groups": [g.as_dict() for g in groups]},
    )


@dataclass(frozen=True, slots=True)
class Operators:
    """TICKQ_OPERATORS: JWT callers by (issuer, claim value), IAM callers by ARN."""

    tokens: frozenset[tuple[str, str]]
    principals: frozenset[str]


@lru_cache(maxsize=8)
def operators(setting: str | None) -> Operators:
    """The allow-list a TICKQ_OPERATORS value names; ConfigurationError, naming the entry
    and the form it needs, for an entry of neither form."""
    tokens: set[tuple[str, str]] = set()
    principals: set[str] = set()
    for entry in comma_list(setting):
        issuer, bar, subject = entry.partition("|")
        if bar:
            if not issuer or not subject or issuer != issuer.strip() or subject != subject.strip():
                raise ConfigurationError(
                    f"{OPERATORS_SETTING} entry {entry!r}: write '<issuer>|<subject>', "
                    "both non-empty and without spaces around the '|'"
                )
            tokens.add((issuer, subject))
        elif entry.startswith("arn:") and len(entry.split(":", 5)) == 6:
            principals.add(entry)
        else:
            raise ConfigurationError(
                f"{OPERATORS_SETTING} entry {entry!r} names no issuer: write "
                f"'<issuer>|{entry}' (the token's exact iss, a '|', then its subject) for a "
                "JWT caller, or an IAM principal ARN (arn:...) for an IAM caller"
            )
    return Operators(frozenset(tokens), frozenset(principals))


def caller_is_operator(request_context: Mapping[str, Any] | None, env: Mapping[str, str]) -> bool:
    """Whether the request's caller is on the operator allow-list: a JWT caller by its
    issuer and named claim or a group (is_operator), an IAM caller by its principal ARN."""
    claims = jwt_claims(request_context)
    if claims:
        return is_operator(claims, env)
    arn = iam_arn(request_context)
    return arn is not None and arn in operators(env.get(OPERATORS_SETTING)).principals


def is_operator(claims: Mapping[str, Any], env: Mapping[str, str]) -> bool:
    """Whether a JWT caller is on the operator allow-list, by its issuer and named claim,
    or by a group.

    By issuer and subject together: a subject is unique only within its issuer, so another
    trusted issuer's user of the same subject is someone else. Never by owner id: the
    allow-list names callers as their issuer knows them.
    """
    issuer = claims.get("iss")
    who = claims.get(env.get("TICKQ_OPERATOR_CLAIM") or DEFAULT_OPERATOR_CLAIM)
    allowed = operators(env.get(OPERATORS_SETTING))
    if isinstance(issuer, str) and isinstance(who, str) and (issuer, who) in allowed.tokens:
        return True
    groups_issuer = (env.get(GROUPS_ISSUER_SETTING) or "").strip()
    if groups_issuer and issuer != groups_issuer:
        return False
    groups = set(comma_list(env.get("TICKQ_OPERATOR_GROUPS", DEFAULT_OPERATOR_GROUPS)))
    group_claim = env.get("TICKQ_OPERATOR_GROUPS_CLAIM") or DEFAULT_GROUPS_CLAIM
    return bool(groups & _claim_list(claims.get(group_claim)))


# Checked as the module loads (a Lambda cold start, `tickq serve`): a malformed allow-list
# stops the function with its reason, rather than serving with operators nobody meant.
operators(os.environ.get(OPERATORS_SETTING))


def queue_overview(rows: Iterable[StatsRow]) -> list[QueueOverview]:
    """Per-queue depth, oldest runnable age, running and dead counts from the stats rows."""
    totals: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = totals.setdefault(row.queue, {"oldest": None, "total": 0})
        entry[row.status] = entry.get(row.status, 0) + row.count
        entry["total"] += row.count
        if row.oldest_runnable_seconds is not None:
            entry["oldest"] = max(entry["oldest"] or 0.0, row.oldest_runnable_seconds)
    return [
        QueueOverview(
            queue=queue,
            depth=entry.get(Status.QUEUED, 0) + entry.get(Status.RETRYING, 0),
            oldest_runnable_seconds=entry["oldest"],
            waiting=entry.get(Status.WAITING, 0),
            running=entry.get(Status.RUNNING, 0),
            retrying=entry.get(Status.RETRYING, 0),
            dead=entry.get(Status.DEAD, 0),
            total=entry["total"],
        )
        for queue, entry in sorted(totals.items())
    ]


def starved_groups(groups: Iterable[GroupStats], limit: int = SHOWN_GROUPS) -> list[GroupStats]:
    """The fairness groups waiting longest first (then the busiest), at most `limit`: a
    view of thousands of tenants shows those being left behind."""
    return sorted(
        groups, key=lambda g: (-(g.oldest_runnable_seconds or -1.0), -g.waiting, g.queue, g.group)
    )[:limit]


def _request_context() -> Mapping[str, Any] | None:
    context = router.current_event.raw_event.get("requestContext")
    return context if isinstance(context, Mapping) else None


def _claims() -> Mapping[str, Any]:
    return jwt_claims(_request_context())


def _owner() -> str:
    return str(caller_id(router.current_event.raw_event.get("requestContext")))


def _claim_list(value: Any) -> set[str]:
    """A list claim: a JSON list (as such or as JSON text), or API Gateway's flattened
    "[a b]" form, split on whitespace only (Cognito group names hold none). Anything else,
    a bare string included, holds no group."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = json.loads(text)
        except ValueError:
            if not (text.startswith("[") and text.endswith("]")):
                return set()
            value = text[1:-1].split()
    if not isinstance(value, list):
        return set()
    return {v for v in value if isinstance(v, str) and v}


@cache
def _asset_text(name: str) -> str:
    # By this module's own package, never a spelled name: installed it is
    # tickq.functions, and an application may have a `functions` package of its own.
    static = resources.files("tickq.functions") / "static"
    return (static / name).read_text(encoding="utf-8")


def _static(name: str, content_type: str) -> Response:
    return Response(
        status_code=HTTPStatus.OK,
        content_type=content_type,
        body=_asset_text(name),
        headers=dict(SECURITY_HEADERS),
    )


def _json(status: int, body: Any) -> Response:
    return Response(
        status_code=int(status),
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body, default=str),
    )
