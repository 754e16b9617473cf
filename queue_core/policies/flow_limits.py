"""Flow limits and holds on PostgreSQL (queue_core/model/flow.py): the operator's side, one
statement per operation. The claims apply them (tickq.flow_admit)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from queue_core.model import flow
from queue_core.policies.limits import LimitNotFound
from queue_core.postgres.executor import Executor

# The most keys `keys()` lists: the view of an operator, not an export.
MAX_LISTED_KEYS = 1000


class FlowLimits:
    """Flow limit and hold rows on one psycopg connection."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._db = Executor(conn)

    def set(self, limit: flow.FlowLimit) -> flow.FlowLimit:
        row = self._db.dicts("flow_limits_set", limit.to_dict())[0]
        return flow.FlowLimit(**row)

    def limits(self) -> list[flow.FlowLimit]:
        return [flow.FlowLimit(**row) for row in self._db.dicts("flow_limits_list", {})]

    def clear(self, prefix: str) -> None:
        if not self._db.dicts("flow_limits_clear", {"prefix": prefix}):
            raise LimitNotFound("flow prefix", prefix)

    def hold(self, key: str, seconds: float, *, now: datetime | None = None) -> datetime:
        """Keep every job of `key` from starting for `seconds` (at most a day); a longer
        hold already set stands. Returns when the hold ends."""
        params = {
            "key": flow.key(key, "key", flow.MAX_STORED_KEY),
            "seconds": flow.hold_seconds(seconds),
            "now": now,
        }
        until: datetime = self._db.dicts("flow_hold", params)[0]["until"]
        return until

    def release(self, key: str) -> None:
        if not self._db.dicts("flow_hold_release", {"key": key}):
            raise LimitNotFound("flow hold", key)

    def keys_now(self, *, now: datetime | None = None) -> list[dict[str, Any]]:
        """The keys with live jobs or a hold: running, waiting, held until, governing
        prefix."""
        return self._db.dicts("flow_keys_now", {"now": now, "limit": MAX_LISTED_KEYS})
