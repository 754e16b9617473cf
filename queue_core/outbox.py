"""The outbox: events written in the transaction of the change they report, published later.

A job's lifecycle events go into `tickq.outbox` in the same transaction as the state change:
`Job Dead` on every path to dead (the trigger jobs_outbox_dead), the events a task opts
into (`@task(events=["succeeded", ...])`) with the finish that persists their outcome. An
application adds its own with `publish(conn, detail_type, detail)` inside its transaction,
so the event exists exactly when the change it reports committed.

`publish_pending` sends pending events, oldest first, through a `Send` the caller gives (the
Lambda shell's puts them on EventBridge), and marks each published in the transaction that
sent it. Delivery is at least once: a publisher that dies after the bus accepted an event and
before its transaction committed leaves it pending, and the next run sends it again with
the same `event_id` (in the event's detail). Consumers drop repeats by that id.

Order: one publisher at a time (a transaction-level advisory lock), each call carries at most
one event per job, and a job whose event the bus refused keeps its later events back until
the next run, so a job's events arrive in the order they were written. A refused event is
retried with exponential backoff within the run, then stays pending for the next one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg

from . import validation
from .errors import InvalidJob
from .events import DETAIL_TYPES, EVENT_NAMES, event_statuses, lifecycle_event
from .postgres.executor import Executor

__all__ = [
    "DEFAULT_RETENTION_SECONDS",
    "DETAIL_TYPES",
    "EVENT_NAMES",
    "Backlog",
    "Event",
    "Outbox",
    "PublishReport",
    "event_statuses",
    "lifecycle_event",
    "outbox_retention_seconds",
    "publish",
    "publish_pending",
]

# The source of tickq's own events; applications publish under another.
TICKQ_SOURCE = "tickq"
DEFAULT_USER_SOURCE = "tickq.app"
# What one EventBridge call takes, and what a pass reads to fill its calls.
EVENTS_PER_CALL = 10
_PAGE = 100
# Retries of a refused event within one run: 0.2 s, 0.4 s, 0.8 s, at most 5 s apart.
RETRIES = 3
BACKOFF_BASE = 0.2
BACKOFF_MAX = 5.0
# Published events are kept this long (TICKQ_OUTBOX_RETENTION), then pruned.
DEFAULT_RETENTION_SECONDS = 7 * 86_400.0
_PRUNE_BATCH = 1000
# pg_try_advisory_xact_lock's key: "tickq.outbox" as a number, the publishers' alone.
LOCK_KEY = 0x7469636B71_6F7574
_MAX_DETAIL_BYTES = 200_000


@dataclass(frozen=True, slots=True)
class Event:
    """A pending event as the publisher reads it."""

    id: int
    event_id: UUID
    job_id: UUID | None
    source: str
    detail_type: str
    detail: Mapping[str, Any]
    attempts: int = 0

    @property
    def order_key(self) -> UUID:
        """What the order is kept within: the job, or the event alone when it has none."""
        return self.job_id or self.event_id

    def body(self) -> str:
        """The detail as sent: the stored one with the event's stable id added."""
        return json.dumps({**self.detail, "event_id": str(self.event_id)})


# Sends events; returns, per event in order, None when the bus accepted it or the reason it
# did not. Raising is a failure of every event.
Send = Callable[[Sequence[Event]], Sequence[str | None]]


@dataclass(slots=True)
class PublishReport:
    published: int = 0
    failed: int = 0  # sends refused (each retry counts)
    held: int = 0  # jobs or events left for the next run after their retries
    busy: bool = False  # another publisher held the lock
    stopped: bool = False  # a whole call was refused: the rest waits for the next run

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class Backlog:
    pending: int
    oldest_seconds: float | None
    most_attempts: int

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def outbox_retention_seconds() -> float:
    """How long published events are kept: TICKQ_OUTBOX_RETENTION (30d, 12h, 3600), 7 days
    by default."""
    from .retention import parse_age

    value = os.environ.get("TICKQ_OUTBOX_RETENTION")
    return DEFAULT_RETENTION_SECONDS if not value else parse_age(value)


def publish(
    conn: psycopg.Connection[Any],
    detail_type: str,
    detail: Mapping[str, Any],
    *,
    source: str = DEFAULT_USER_SOURCE,
) -> UUID:
    """Put an event of the application's own into the outbox on `conn`, inside the caller's
    transaction: it is published once that transaction commits, and never if it rolls back.
    Returns the event's id (in its detail as `event_id`)."""
    detail_type = validation.text(detail_type, "detail_type", 128)
    source = validation.text(source, "source", 256)
    if source == TICKQ_SOURCE:
        raise InvalidJob("source", f"{TICKQ_SOURCE!r} is tickq's own source")
    text = validation.json_object(detail, "detail", _MAX_DETAIL_BYTES)
    rows = Executor(conn).rows(
        "outbox_publish", {"source": source, "detail_type": detail_type, "detail": text}
    )
    return UUID(str(rows[0][1]))


class Outbox:
    """The outbox on one psycopg connection (autocommit, or inside the caller's
    transaction): the backlog, the listing, the pruning of published events."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._db = Executor(conn)

    def backlog(self, *, now: datetime | None = None) -> Backlog:
        row = self._db.dicts("outbox_backlog", {"now": now})[0]
        oldest = row["oldest_seconds"]
        return Backlog(
            int(row["pending"]), None if oldest is None else float(oldest), row["most_attempts"]
        )

    def events(
        self, *, pending_only: bool = False, job_id: UUID | str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        limit = validation.integer(limit, "limit", 1, 10_000)
        job = None if job_id is None else validation.uuid(job_id, "job_id")
        return self._db.dicts(
            "outbox_list", {"pending_only": pending_only, "job_id": job, "limit": limit}
        )

    def prune(
        self,
        *,
        max_age_seconds: float = DEFAULT_RETENTION_SECONDS,
        now: datetime | None = None,
        should_continue: Callable[[], bool] = lambda: True,
    ) -> int:
        """Delete events published more than `max_age_seconds` ago, a batch per statement;
        pending events always stay."""
        cut = (now or _db_now(self._db)) - timedelta(seconds=max_age_seconds)
        deleted = 0
        while should_continue():
            n = self._db.rows("outbox_prune", {"before": cut, "limit": _PRUNE_BATCH})[0][0]
            deleted += n
            if n < _PRUNE_BATCH:
                break
        return deleted


def _db_now(db: Executor) -> datetime:
    now: datetime = db.rows("outbox_now", {})[0][0]
    return now


def publish_pending(
    conn: psycopg.Connection[Any],
    send: Send,
    *,
    time_left: Callable[[], float] | None = None,
    max_calls: int | None = None,
    retries: int = RETRIES,
    sleep: Callable[[float], None] = time.sleep,
    now: datetime | None = None,
) -> PublishReport:
    """Send pending events oldest first until none is left, `time_left()` (seconds) runs
    out or `max_calls` calls were made. Each call is its own transaction under the
    publishers' lock: the events the bus accepted are marked published when it commits, the
    refused ones are retried with exponential backoff, then left pending (with the reason)
    and their jobs' later events held back for the next run."""
    db = Executor(conn)
    report = PublishReport()
    held: list[UUID] = []
    calls = 0
    while (max_calls is None or calls < max_calls) and (time_left is None or time_left() > 0):
        with db.atomic():
            if not db.rows("outbox_lock", {"key": LOCK_KEY})[0][0]:
                report.busy = True
                break
            chunk = _one_per_job(db.rows("outbox_pending", {"held": held, "limit": _PAGE}))
            if not chunk:
                break
            calls += 1
            refused = _send_with_retries(db, send, chunk, report, retries, sleep, time_left, now)
        for event in refused:
            held.append(event.order_key)
        report.held += len(refused)
        if len(refused) == len(chunk):
            # Nothing of a whole call got through its retries: the bus is down or refusing,
            # and the next call would cost the same retries again. The next run goes on.
            report.stopped = True
            break
    return report


def _one_per_job(rows: Sequence[Any]) -> list[Event]:
    """The first EVENTS_PER_CALL events of distinct jobs, in id order: a job's second event
    waits for the next call, after its first was accepted."""
    chunk: list[Event] = []
    seen: set[UUID] = set()
    for id_, event_id, job_id, source, detail_type, detail, attempts in rows:
        event = Event(id_, event_id, job_id, source, detail_type, detail, attempts)
        if event.order_key in seen:
            continue
        seen.add(event.order_key)
        chunk.append(event)
        if len(chunk) == EVENTS_PER_CALL:
            break
    return chunk


def _send_with_retries(
    db: Executor,
    send: Send,
    chunk: list[Event],
    report: PublishReport,
    retries: int,
    sleep: Callable[[float], None],
    time_left: Callable[[], float] | None,
    now: datetime | None,
) -> list[Event]:
    """Send `chunk`, retrying the refused events; returns those still refused."""
    todo = chunk
    for attempt in range(retries + 1):
        try:
            answers: Sequence[str | None] = send(todo)
        except Exception as exc:
            answers = [f"{type(exc).__name__}: {exc}"] * len(todo)
        if len(answers) != len(todo):
            answers = ["the bus answered for another number of events"] * len(todo)
        accepted = [e.id for e, answer in zip(todo, answers, strict=True) if answer is None]
        if accepted:
            db.rows("outbox_published", {"ids": accepted, "now": now, "tries": attempt + 1})
            report.published += len(accepted)
        refused = [(e, a) for e, a in zip(todo, answers, strict=True) if a is not None]
        if not refused:
            return []
        report.failed += len(refused)
        todo = [e for e, _ in refused]
        pause = min(BACKOFF_BASE * 2**attempt, BACKOFF_MAX)
        if attempt == retries or (time_left is not None and time_left() <= pause):
            db.rows(
                "outbox_failed",
                {
                    "ids": [e.id for e, _ in refused],
                    "errors": [str(a) for _, a in refused],
                    "tries": attempt + 1,
                },
            )
            return todo
        sleep(pause)
    return todo
