"""Per-type and per-queue limits: values, validation and their table operations.

Enforcement lives in SQL, inside the claim (`tickq.claim_limited`) and the enqueue
(`tickq.queue_admit`), so concurrent workers can never overshoot; this module only sets
and lists the numbers. A type limit or cap per group holds from every worker's next claim
(the plain claim's guard, queue_core/postgres/claim.py); a queue limit reaches enqueuers
within `LIMITS_TTL_SECONDS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg

from queue_core.errors import InvalidJob, TickqError
from queue_core.model import validation
from queue_core.postgres.executor import Executor
from queue_core.postgres.probes import LIMITS_TTL_SECONDS

__all__ = [
    "LIMITS_TTL_SECONDS",
    "MAX_LIMIT",
    "LimitNotFound",
    "Limits",
    "QueueGroupLimit",
    "QueueLimit",
    "TypeLimit",
    "parse_rate",
]

MAX_LIMIT = 1_000_000
MAX_RATE = 10_000  # starts per period: bounds the rate log kept in the limit row
MAX_PERIOD_SECONDS = 86_400.0
_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hr", "hour", "hours"), 3600.0),
}
_RATE = re.compile(r"(\d+)/(\d+(?:\.\d+)?)?([a-z]+)")


class LimitNotFound(TickqError):
    """No such limit."""

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"no limit is set for {kind} {name!r}")


@dataclass(frozen=True, slots=True)
class TypeLimit:
    """At most `max_running` jobs of `type` running at once across all workers, at most
    `rate_limit` starts in any window of `rate_period_seconds`, and at most
    `max_running_per_group` running at once in any one group."""

    type: str
    max_running: int | None = None
    rate_limit: int | None = None
    rate_period_seconds: float | None = None
    running: int = 0
    max_running_per_group: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "max_running": self.max_running,
            "rate_limit": self.rate_limit,
            "rate_period_seconds": self.rate_period_seconds,
            "max_running_per_group": self.max_running_per_group,
            "running": self.running,
        }


@dataclass(frozen=True, slots=True)
class QueueLimit:
    """Enqueue into `queue` is refused (QueueFull) once `max_depth` jobs wait in it (queued,
    retrying or waiting for parents), and an application user's once that owner has
    `max_depth_per_owner` live jobs in it; either may be None (no such bound)."""

    queue: str
    max_depth: int | None
    waiting: int = 0
    max_depth_per_owner: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "max_depth": self.max_depth,
            "max_depth_per_owner": self.max_depth_per_owner,
            "waiting": self.waiting,
        }


@dataclass(frozen=True, slots=True)
class QueueGroupLimit:
    """At most `max_running_per_group` jobs of `queue` running at once in any one group;
    `busiest` is the most that one group runs now."""

    queue: str
    max_running_per_group: int
    busiest: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "max_running_per_group": self.max_running_per_group,
            "busiest_group_running": self.busiest,
        }


def parse_rate(text: Any) -> tuple[int, float]:
    """'5/s', '100/min', '10/30s', '1000/hour' -> (starts, period in seconds)."""
    raw = text.replace(" ", "").lower() if isinstance(text, str) else ""
    match = _RATE.fullmatch(raw)
    if not match or match.group(3) not in _UNITS:
        raise InvalidJob("rate", f"expected N/PERIOD such as 5/s, 100/min or 10/30s, got {text!r}")
    period = float(match.group(2) or 1) * _UNITS[match.group(3)]
    return (
        validation.integer(int(match.group(1)), "rate", 1, MAX_RATE),
        validation.number(period, "rate period", 0.001, MAX_PERIOD_SECONDS),
    )


def type_limit(
    type: Any,
    *,
    max_running: Any = None,
    rate_limit: Any = None,
    rate_period_seconds: Any = None,
    max_running_per_group: Any = None,
) -> TypeLimit:
    """Validate a type limit: a cap, a rate (count and period together), a cap per group,
    or any of them together."""
    name = validation.name(type, "type")
    if max_running is None and rate_limit is None and max_running_per_group is None:
        raise InvalidJob("limit", "give a concurrency cap, a rate, a cap per group, or several")
    if (rate_limit is None) != (rate_period_seconds is None):
        raise InvalidJob("rate", "give both the number of starts and the period")
    return TypeLimit(
        name,
        None
        if max_running is None
        else validation.integer(max_running, "max_running", 1, MAX_LIMIT),
        None if rate_limit is None else validation.integer(rate_limit, "rate", 1, MAX_RATE),
        None
        if rate_period_seconds is None
        else validation.number(rate_period_seconds, "rate period", 0.001, MAX_PERIOD_SECONDS),
        max_running_per_group=None
        if max_running_per_group is None
        else validation.integer(max_running_per_group, "max_running_per_group", 1, MAX_LIMIT),
    )


def queue_limit(
    queue: Any, *, max_depth: Any = None, max_depth_per_owner: Any = None
) -> QueueLimit:
    """Validate a queue limit: a depth, a cap per owner, or both (None keeps a stored one)."""
    if max_depth is None and max_depth_per_owner is None:
        raise InvalidJob("limit", "give a maximum depth, a maximum per owner, or both")
    return QueueLimit(
        validation.name(queue, "queue"),
        None if max_depth is None else validation.integer(max_depth, "max_depth", 1, MAX_LIMIT),
        max_depth_per_owner=None
        if max_depth_per_owner is None
        else validation.integer(max_depth_per_owner, "max_depth_per_owner", 1, MAX_LIMIT),
    )


def queue_group_limit(queue: Any, *, max_running_per_group: Any) -> QueueGroupLimit:
    return QueueGroupLimit(
        validation.name(queue, "queue"),
        validation.integer(max_running_per_group, "max_running_per_group", 1, MAX_LIMIT),
    )


class Limits:
    """Limit rows on one psycopg connection; each operation is one statement."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._db = Executor(conn)

    def set_type(self, limit: TypeLimit) -> TypeLimit:
        params = {
            "type": limit.type,
            "max_running": limit.max_running,
            "rate_limit": limit.rate_limit,
            "rate_period_seconds": limit.rate_period_seconds,
            "max_running_per_group": limit.max_running_per_group,
        }
        row = self._db.dicts("type_limits_set", params)[0]
        return TypeLimit(**row)

    def set_queue(self, limit: QueueLimit) -> QueueLimit:
        params = {
            "queue": limit.queue,
            "max_depth": limit.max_depth,
            "max_depth_per_owner": limit.max_depth_per_owner,
        }
        row = self._db.dicts("queue_limits_set", params)
        return QueueLimit(**row[0])

    def set_queue_group(self, limit: QueueGroupLimit) -> QueueGroupLimit:
        params = {"queue": limit.queue, "max_running_per_group": limit.max_running_per_group}
        return QueueGroupLimit(**self._db.dicts("queue_group_limits_set", params)[0])

    def queue_groups(self) -> list[QueueGroupLimit]:
        return [QueueGroupLimit(**row) for row in self._db.dicts("queue_group_limits_list", {})]

    def clear_queue_group(self, queue: str) -> None:
        if not self._db.dicts("queue_group_limits_clear", {"queue": queue}):
            raise LimitNotFound("queue (per group)", queue)

    def types(self) -> list[TypeLimit]:
        return [TypeLimit(**row) for row in self._db.dicts("type_limits_list", {})]

    def queues(self) -> list[QueueLimit]:
        return [QueueLimit(**row) for row in self._db.dicts("queue_limits_list", {})]

    def clear_type(self, type: str) -> None:
        if not self._db.dicts("type_limits_clear", {"type": type}):
            raise LimitNotFound("type", type)

    def clear_queue(self, queue: str) -> None:
        if not self._db.dicts("queue_limits_clear", {"queue": queue}):
            raise LimitNotFound("queue", queue)
