"""Every error a handler can meet, mapped once to an HTTP status and a JSON body.

Internals never leak: an unexpected exception becomes a 500 naming only the request id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from queue_core import (
    ConfigurationError,
    DatabaseError,
    InvalidJob,
    InvalidTransition,
    JobNotFound,
    LeaseLost,
    QueueFull,
    TickqError,
    UnknownJobType,
)
from queue_core.console.jobs import CountChanged
from queue_core.policies.limits import LimitNotFound
from queue_core.policies.pauses import QueueNotPaused
from tickq.functions import db
from tickq.functions.app_role import LoginBypassesSecurity


class BadRequest(TickqError):
    """The request is malformed."""

    def __init__(self, message: str, status: int = 400) -> None:
        self.status = status
        super().__init__(message)


class Unauthorized(TickqError):
    """The request carries no caller identity."""


# Errors whose message is the whole answer. A login that would bypass row-level security
# is the service's fault, not the caller's: 503, and the function log says how to fix it.
PLAIN_STATUS: dict[type[Exception], int] = {
    Unauthorized: 401,
    JobNotFound: 404,
    LimitNotFound: 404,
    LeaseLost: 409,
    LoginBypassesSecurity: 503,
}


@dataclass(frozen=True, slots=True)
class Problem:
    status: int
    error: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {"error": self.error, "message": self.message, **self.details}


def problem(exc: BaseException, request_id: str | None = None) -> Problem:
    """The status and body that describe `exc` to a caller."""
    name = type(exc).__name__
    if isinstance(exc, BadRequest):
        return Problem(exc.status, name, str(exc))
    for kind, status in PLAIN_STATUS.items():
        if isinstance(exc, kind):
            return Problem(status, name, str(exc))
    if isinstance(exc, UnknownJobType):
        return Problem(422, name, str(exc), {"field": exc.field, "known": exc.known})
    if isinstance(exc, InvalidJob):
        return Problem(422, name, str(exc), {"field": exc.field, "reason": exc.reason})
    if isinstance(exc, InvalidTransition):
        return Problem(409, name, str(exc), {"status": str(exc.status)})
    if isinstance(exc, CountChanged | QueueNotPaused):
        return Problem(409, name, str(exc), _conflict(exc))
    if isinstance(exc, QueueFull):
        # The depth counts every user's jobs: an API caller learns only that it is full.
        message = f"queue {exc.queue!r} is full; try again later"
        return Problem(429, name, message, {"queue": exc.queue})
    if isinstance(exc, DatabaseError):
        # The connection may be the casualty; the next invocation opens a fresh one.
        db.discard()
        return Problem(503, name, "the database is unavailable; try again shortly")
    if isinstance(exc, ConfigurationError):
        return Problem(500, name, "the service is misconfigured", _request(request_id))
    if isinstance(exc, TickqError):
        return Problem(403, name, str(exc))
    return Problem(500, "InternalError", "internal error", _request(request_id))


def _conflict(exc: TickqError) -> dict[str, Any]:
    if isinstance(exc, CountChanged):
        return {"expected": exc.expected, "current": exc.current}
    if isinstance(exc, QueueNotPaused):
        return {"queue": exc.queue}
    return {}


def _request(request_id: str | None) -> dict[str, Any]:
    return {"request_id": request_id} if request_id else {}
