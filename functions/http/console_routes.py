"""The operator console's routes: charts, queue pause and resume, flow limits and holds,
bulk actions, filters.

Users act on their own jobs (`POST /jobs/actions`). Everything under /admin is for the
operators of functions/http/ui.py's allow-list, and runs in a transaction acting as
tickq_operator, which may only call the narrow functions granted to it
(queue_core/schema/policies.sql).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from http import HTTPStatus
from typing import Any, Literal
from uuid import UUID

import psycopg
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import AwareDatetime, BaseModel, ConfigDict, StrictInt

from queue_core.config import comma_list
from queue_core.console.charts import QueueHistory
from queue_core.console.jobs import (
    BulkAction,
    JobFilter,
    OperatorConsole,
    act_as_user,
    as_operator,
    job_ids,
)
from queue_core.model.flow import flow_limit
from queue_core.policies.flow_limits import FlowLimits
from queue_core.policies.limits import parse_rate
from queue_core.policies.outbox import Outbox
from queue_core.policies.pauses import QueuePauses
from tickq.functions import db
from tickq.functions.http.errors import BadRequest
from tickq.functions.http.identity import caller_id, iam_arn, jwt_claims
from tickq.functions.http.requests import json_body, parse
from tickq.functions.http.ui import NotOperator, caller_is_operator
from tickq.functions.runtime import store

router = Router()

FILTERS = {"status", "type", "queue", "group", "error", "from", "to", "limit", "cursor"}


class ActionRequest(BaseModel):
    """Retry or cancel a selection of jobs in one request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["retry", "cancel"]
    ids: list[str]


class PauseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    reason: str | None = None


class FlowLimitRequest(BaseModel):
    """Set a key prefix's flow limits: a cap per key, a rate per key ("100/min"), or both."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prefix: str
    max_running: StrictInt | None = None
    rate: str | None = None


class FlowClearRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prefix: str


class FlowHoldRequest(BaseModel):
    """Keep every job of one key from starting for `seconds` (at most a day)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    seconds: StrictInt | float


class RetryDeadRequest(BaseModel):
    """Retry every dead job of a type and/or queue; `expected` is the count confirmed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str | None = None
    queue: str | None = None
    expected: StrictInt


class Window(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    created_from: AwareDatetime | None = None
    created_to: AwareDatetime | None = None


@router.post("/jobs/actions")
def act_on_my_jobs() -> Response:
    request = parse(ActionRequest, json_body(router.current_event))
    mine = store(user_id=_caller())
    results = act_as_user(mine, BulkAction(request.action), job_ids(request.ids))
    return _json(HTTPStatus.OK, {"results": [r.as_dict() for r in results]})


@router.post("/admin/jobs/actions")
def act_on_any_jobs() -> Response:
    _operator()
    request = parse(ActionRequest, json_body(router.current_event))
    with operator_connection() as conn:
        results = OperatorConsole(conn).act(BulkAction(request.action), job_ids(request.ids))
    return _json(HTTPStatus.OK, {"results": [r.as_dict() for r in results]})


@router.get("/admin/jobs")
def list_any_jobs() -> Response:
    _operator()
    query = _query(FILTERS)
    with operator_connection() as conn:
        page = OperatorConsole(conn).jobs(
            job_filter(query), limit=_limit(query.get("limit")), cursor=query.get("cursor") or None
        )
    return _json(HTTPStatus.OK, {"jobs": page.jobs, "next_cursor": page.next_cursor})


@router.get("/admin/jobs/<job_id>")
def get_any_job(job_id: str) -> Response:
    _operator()
    with operator_connection() as conn:
        job = OperatorConsole(conn).job(job_id)
    return _json(HTTPStatus.OK, job)


@router.get("/admin/dead/count")
def count_dead() -> Response:
    _operator()
    query = _query({"type", "queue"})
    with operator_connection() as conn:
        count = OperatorConsole(conn).count_dead(
            types=_csv(query.get("type")), queues=_csv(query.get("queue"))
        )
    return _json(HTTPStatus.OK, {"count": count})


@router.post("/admin/dead/retry")
def retry_dead() -> Response:
    _operator()
    request = parse(RetryDeadRequest, json_body(router.current_event))
    with operator_connection() as conn:
        results = OperatorConsole(conn).retry_dead(
            types=None if request.type is None else [request.type],
            queues=None if request.queue is None else [request.queue],
            expected=request.expected,
        )
    return _json(HTTPStatus.OK, {"results": [r.as_dict() for r in results]})


@router.post("/admin/queues/<queue>/pause")
def pause_queue(queue: str) -> Response:
    who = _operator()
    body = json_body(router.current_event, required=False)
    request = parse(PauseRequest, body if body is not None else {})
    with operator_connection() as conn:
        pause = QueuePauses(conn).pause(queue, by=who, reason=request.reason)
    return _json(HTTPStatus.OK, pause.as_dict())


@router.post("/admin/queues/<queue>/resume")
def resume_queue(queue: str) -> Response:
    _operator()
    with operator_connection() as conn:
        pause = QueuePauses(conn).resume(queue)
    return _json(HTTPStatus.OK, {**pause.as_dict(), "resumed": True})


@router.get("/admin/queues")
def paused_queues() -> Response:
    _operator()
    with operator_connection() as conn:
        pauses = QueuePauses(conn).all()
    return _json(HTTPStatus.OK, {"pauses": [p.as_dict() for p in pauses]})


@router.get("/admin/flow")
def flow_now() -> Response:
    """The limited key prefixes, and the keys with jobs or a hold now (counts, never a job).
    Key prefixes may hold '/', so the actions below take them in the body, not the path."""
    _operator()
    with operator_connection() as conn:
        limits = FlowLimits(conn)
        body = {
            "limits": [limit.to_dict() for limit in limits.limits()],
            "keys": limits.keys_now(),
        }
    return _json(HTTPStatus.OK, body)


@router.post("/admin/flow/limits")
def set_flow_limit() -> Response:
    _operator()
    request = parse(FlowLimitRequest, json_body(router.current_event))
    rate = None if request.rate is None else parse_rate(request.rate)
    wanted = flow_limit(request.prefix, max_running=request.max_running, rate=rate)
    with operator_connection() as conn:
        limit = FlowLimits(conn).set(wanted)
    return _json(HTTPStatus.OK, limit.to_dict())


@router.post("/admin/flow/clear")
def clear_flow_limit() -> Response:
    _operator()
    request = parse(FlowClearRequest, json_body(router.current_event))
    with operator_connection() as conn:
        FlowLimits(conn).clear(request.prefix)
    return _json(HTTPStatus.OK, {"cleared": request.prefix})


@router.post("/admin/flow/hold")
def hold_flow_key() -> Response:
    _operator()
    request = parse(FlowHoldRequest, json_body(router.current_event))
    with operator_connection() as conn:
        until = FlowLimits(conn).hold(request.key, request.seconds)
    return _json(HTTPStatus.OK, {"key": request.key, "held_until": until})


@router.get("/admin/charts")
def charts() -> Response:
    _operator()
    query = _query({"window", "queue"})
    window = query.get("window") or "hour"
    queue = query.get("queue") or None
    with operator_connection() as conn:
        history = QueueHistory(conn)
        throughput = history.throughput(window, queue=queue)
        depth = history.depth(window, queue=queue)
    body = {
        "window": window,
        "queue": queue,
        "throughput": [b.as_dict() for b in throughput],
        "depth": [d.as_dict() for d in depth],
    }
    return _json(HTTPStatus.OK, body)


@router.get("/admin/outbox")
def outbox_backlog() -> Response:
    """The events waiting to be published: how many, the oldest one's wait (counts only)."""
    _operator()
    with operator_connection() as conn:
        backlog = Outbox(conn).backlog()
    return _json(HTTPStatus.OK, backlog.as_dict())


@contextmanager
def operator_connection() -> Iterator[psycopg.Connection[Any]]:
    """The environment's connection, acting as tickq_operator for one transaction."""
    with as_operator(db.connection()) as conn:
        yield conn


def job_filter(query: Mapping[str, str]) -> JobFilter:
    """The list's filters from query parameters (comma-separated lists, ISO 8601 times)."""
    window = parse(
        Window,
        {"created_from": query.get("from") or None, "created_to": query.get("to") or None},
    )
    return JobFilter.of(
        statuses=_csv(query.get("status")),
        types=_csv(query.get("type")),
        queues=_csv(query.get("queue")),
        groups=_csv(query.get("group")),
        error=query.get("error") or None,
        created_from=window.created_from,
        created_to=window.created_to,
    )


def _operator() -> str:
    """The operator's name (who paused a queue), or NotOperator."""
    context = router.current_event.raw_event.get("requestContext")
    context = context if isinstance(context, Mapping) else None
    if not caller_is_operator(context, os.environ):
        raise NotOperator()
    claims = jwt_claims(context)
    name = claims.get("username") or claims.get("cognito:username") or claims.get("sub")
    return str(name or iam_arn(context) or _caller())[:200]


def _caller() -> UUID:
    return caller_id(router.current_event.raw_event.get("requestContext"))


def _query(allowed: set[str]) -> dict[str, str]:
    query = router.current_event.query_string_parameters or {}
    unknown = set(query) - allowed
    if unknown:
        raise BadRequest(f"unknown query parameters: {', '.join(sorted(unknown))}")
    return dict(query)


def _csv(value: str | None) -> list[str] | None:
    """A filter's values; None (no filter) when absent or empty."""
    return list(comma_list(value)) or None


def _limit(value: str | None) -> int:
    if value is None:
        return 50
    try:
        return int(value)
    except ValueError:
        raise BadRequest(f"limit must be an integer, got {value[:40]!r}") from None


def _json(status: int, body: Any) -> Response:
    return Response(
        status_code=int(status),
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body, default=_default),
    )


def _default(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)
