"""The console's charts: jobs finished per minute or hour, and queue depth over time.

Finished counts come from the jobs table through its indexes (tickq.throughput,
queue_core/schema/functions/). Depth is sampled by the maintenance pass from the counts it
already reads for its metrics, into tickq.queue_depth_samples, which keeps
DEPTH_KEEP_SECONDS of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from queue_core.errors import InvalidJob
from queue_core.model import validation
from queue_core.model.jobs import RUNNABLE, Status
from queue_core.postgres.executor import Executor
from queue_core.store.port import StatsRow

DEPTH_KEEP_SECONDS = 2 * 86_400
# The two charts the issue asks for: per minute over the last hour, per hour over a day.
WINDOWS = {"hour": (3600, 60), "day": (86_400, 3600)}


@dataclass(frozen=True, slots=True)
class Bucket:
    """Jobs that succeeded, failed and were retried, and went dead in one bucket."""

    start: datetime
    succeeded: int
    failed: int
    dead: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "start": self.start.isoformat(),
            "succeeded": self.succeeded,
            "failed": self.failed,
            "dead": self.dead,
        }


@dataclass(frozen=True, slots=True)
class DepthSample:
    """A queue's depth (queued or retrying), running count and oldest runnable age."""

    sampled_at: datetime
    queue: str
    depth: int
    running: int
    oldest_runnable_seconds: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "sampled_at": self.sampled_at.isoformat(),
            "queue": self.queue,
            "depth": self.depth,
            "running": self.running,
            "oldest_runnable_seconds": self.oldest_runnable_seconds,
        }


def depth_by_queue(rows: Iterable[StatsRow]) -> dict[str, tuple[int, int, float | None]]:
    """Per queue: jobs waiting (queued or retrying, not suspended), running, and the oldest
    runnable age."""
    queues: dict[str, tuple[int, int, float | None]] = {}
    for row in rows:
        depth, running, oldest = queues.get(row.queue, (0, 0, None))
        if row.status in RUNNABLE:
            depth += row.runnable
        elif row.status == Status.RUNNING:
            running += row.count
        if row.oldest_runnable_seconds is not None:
            oldest = max(oldest or 0.0, row.oldest_runnable_seconds)
        queues[row.queue] = (depth, running, oldest)
    return queues


class QueueHistory:
    """Reads and writes the charts' data on one connection."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._db = Executor(conn)

    def record_depth(
        self,
        rows: Iterable[StatsRow],
        *,
        now: datetime | None = None,
        keep_seconds: float = DEPTH_KEEP_SECONDS,
    ) -> int:
        """Store one sample per queue from stats rows; drop samples older than keep_seconds."""
        depths = depth_by_queue(rows)
        params = {
            "queues": list(depths),
            "depths": [d for d, _, _ in depths.values()],
            "running": [r for _, r, _ in depths.values()],
            "oldest": [o for _, _, o in depths.values()],
            "keep_seconds": keep_seconds,
            "now": now,
        }
        self._db.rows("depth_samples_record", params)
        return len(depths)

    def throughput(
        self, window: str = "hour", *, queue: str | None = None, now: datetime | None = None
    ) -> list[Bucket]:
        """Per minute over the last hour ("hour") or per hour over the last day ("day")."""
        span, bucket = _window(window)
        since = self._now(now) - timedelta(seconds=span - bucket)
        params = {"since": since, "bucket_seconds": bucket, "queue": _queue(queue), "now": now}
        return [Bucket(*row) for row in self._db.rows("throughput", params)]

    def depth(
        self, window: str = "hour", *, queue: str | None = None, now: datetime | None = None
    ) -> list[DepthSample]:
        span, _ = _window(window)
        since = self._now(now) - timedelta(seconds=span)
        rows = self._db.rows("depth_history", {"since": since, "queue": _queue(queue)})
        return [DepthSample(*row) for row in rows]

    def _now(self, now: datetime | None) -> datetime:
        if now is not None:
            return validation.aware_datetime(now, "now")
        value: datetime = self._db.rows("clock_now", {})[0][0]
        return value


def _window(window: str) -> tuple[int, int]:
    if window not in WINDOWS:
        raise InvalidJob("window", f"must be one of {sorted(WINDOWS)}, got {window!r}")
    return WINDOWS[window]


def _queue(queue: str | None) -> str | None:
    return None if queue is None else validation.name(queue, "queue")
