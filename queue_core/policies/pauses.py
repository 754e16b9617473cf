"""Paused queues: an operator stops a queue's jobs from being claimed, and starts it again.

Enqueue still works. The claim leaves paused queues out (queue_core/model/paused_queues.py),
so every worker sees a pause within PAUSES_TTL_SECONDS.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from queue_core.errors import TickqError
from queue_core.model import validation
from queue_core.model.paused_queues import PAUSES_TTL_SECONDS
from queue_core.postgres.executor import Executor

MAX_REASON = 500
MAX_PAUSED_BY = 200


__all__ = ["PAUSES_TTL_SECONDS", "QueueNotPaused", "QueuePause", "QueuePauses"]


class QueueNotPaused(TickqError):
    """The queue is not paused."""

    def __init__(self, queue: str) -> None:
        self.queue = queue
        super().__init__(f"queue {queue!r} is not paused")


@dataclass(frozen=True, slots=True)
class QueuePause:
    """A paused queue: who paused it, when, and why."""

    queue: str
    paused_by: str
    paused_at: datetime
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "paused_by": self.paused_by,
            "paused_at": self.paused_at.isoformat(),
            "reason": self.reason,
        }


class QueuePauses:
    """Pause, resume and list queues on one connection; each operation is one statement.

    The statements call security-definer functions, so an operator login (tickq_operator)
    can run them without reading any job.
    """

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._db = Executor(conn)

    def pause(
        self, queue: str, *, by: str, reason: str | None = None, now: datetime | None = None
    ) -> QueuePause:
        params = {
            "queue": validation.name(queue, "queue"),
            "by": validation.text(by, "paused_by", MAX_PAUSED_BY),
            "reason": None if reason is None else validation.text(reason, "reason", MAX_REASON),
            "now": now,
        }
        return QueuePause(*self._db.rows("queue_pause", params)[0])

    def resume(self, queue: str) -> QueuePause:
        rows = self._db.rows("queue_resume", {"queue": validation.name(queue, "queue")})
        if not rows:
            raise QueueNotPaused(queue)
        return QueuePause(*rows[0])

    def all(self) -> list[QueuePause]:
        return [QueuePause(*row) for row in self._db.rows("queue_pauses_list", {})]
