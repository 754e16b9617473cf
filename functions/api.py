"""ApiFunction: the HTTP API over the queue (POST/GET /jobs, retry, cancel).

Environment:
  TICKQ_DATABASE_URL or TICKQ_DB_SECRET_ARN   the application login, a non-superuser member
                                              of tickq_app, so row-level security applies
  TICKQ_TASK_MODULES      handler modules, for per-type defaults and type checks (optional)
  TICKQ_PREPARE_THRESHOLD "off" behind RDS Proxy
  TICKQ_KICK_FUNCTION     TickFunction's name: start a tick right after an enqueue (optional)
Routes live on Routers (functions/http/api_routes.py); another module adds its own by calling
`app.include_router(...)` here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import ServiceError
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from tickq.functions.http import api_routes, console_routes, ui
from tickq.functions.http.errors import Problem, problem
from tickq.functions.observability import (
    continue_trace,
    http_trace_headers,
    log_metrics,
    logger,
    tracer,
)

app = APIGatewayHttpResolver()
app.include_router(api_routes.router)
app.include_router(ui.router)
app.include_router(console_routes.router)


@app.exception_handler(Exception)
def _error(exc: Exception) -> Response:
    found = _problem(exc)
    if found.status >= 500:
        logger.exception("request failed", extra={"status": found.status})
    return _response(found)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@log_metrics
@tracer.capture_lambda_handler
@continue_trace(http_trace_headers)
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    if not _is_http_event(event):
        return _as_dict(_response(Problem(400, "BadRequest", "not an HTTP API (v2) event")))
    return _hardened(app.resolve(event, context))


# Answers hold one user's jobs: no cache along the way may keep them, and no browser may
# read them as anything but the declared type. The page's assets set their own caching.
RESPONSE_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def _hardened(response: dict[str, Any]) -> dict[str, Any]:
    headers = dict(response.get("headers") or {})
    present = {name.lower() for name in headers}
    headers.update({k: v for k, v in RESPONSE_HEADERS.items() if k.lower() not in present})
    return {**response, "headers": headers}


def _problem(exc: Exception) -> Problem:
    if isinstance(exc, ServiceError):  # Powertools' own: unknown route, wrong method
        return Problem(exc.status_code, type(exc).__name__, str(exc.msg))
    return problem(exc, getattr(app.lambda_context, "aws_request_id", None))


def _is_http_event(event: Any) -> bool:
    if not isinstance(event, Mapping):
        return False
    context = event.get("requestContext")
    http = context.get("http") if isinstance(context, Mapping) else None
    optional = (
        ("body", str),
        ("headers", Mapping),
        ("queryStringParameters", Mapping),
        ("pathParameters", Mapping),
        ("isBase64Encoded", bool),
    )
    return (
        isinstance(http, Mapping)
        and isinstance(http.get("method"), str)
        and isinstance(event.get("rawPath"), str)
        and all(event.get(key) is None or isinstance(event[key], kind) for key, kind in optional)
    )


def _response(found: Problem) -> Response:
    return Response(
        status_code=found.status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(found.body(), default=str),
    )


def _as_dict(response: Response) -> dict[str, Any]:
    return {
        "statusCode": response.status_code,
        "headers": {"Content-Type": content_types.APPLICATION_JSON, **RESPONSE_HEADERS},
        "body": response.body,
        "isBase64Encoded": False,
    }
