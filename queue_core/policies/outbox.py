"""The outbox: events written in the transaction of the change they report, published later.

A job's lifecycle events go into `tickq.outbox` in the same transaction as the state change:
`Job Dead` on every path to dead (the trigger jobs_outbox_dead), the events a task opts
into (`@task(events=["succeeded", ...])`) with the finish that persists their outcome. An
application adds its own with `publish(conn, detail_type, detail)` inside its transaction,
so the event exists exactly when the change it reports committed.

`publish_pending` sends pending events through a `Send` the caller gives (the Lambda shell's
puts them on EventBridge), and marks each published in the transaction that sent it.
Delivery is at least once: a publisher that dies after the bus accepted an event and before
its transaction committed leaves it pending, and the next run sends it again with the same
`event_id` (in the event's detail). Consumers drop repeats by that id.

Order: one publisher at a time (a transaction-level advisory lock), each call carries at most
one event per job, and a job whose event the bus refused keeps its later events back until
the next run, so a job's events arrive in the order they were written. A refused event is
retried with exponential backoff within the run, then stays pending for the next one, and
goes after its owner's other events from then on.

Calls: at most EVENTS_PER_CALL entries whose sizes, as EventBridge counts them, add up to at
most CALL_BYTES. An event too big for any call goes out reduced (`Event.reduced`): flagged,
with its size and small fields; its full detail stays in the outbox, read by its event id
(`Outbox.events(event_id=...)`, `tickq events --event ID`).

Fairness: the owners (`user_id`, none for a worker's events) share the calls. Each owner's
oldest events go first, and a run takes an owner's next event as if it were the owner's
n-th of the run (n counting those already sent), so a tenant's backlog delays another's
event by a call at most. Past a page of pending events, the publisher reads each owner's
oldest by the owner (`outbox_heads`), so a backlog however old hides no one's events.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg

from queue_core.errors import InvalidJob
from queue_core.model import json_text, validation
from queue_core.model.events import DETAIL_TYPES, EVENT_NAMES, event_statuses, lifecycle_event
from queue_core.postgres.executor import Executor

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
# An application's own source (tickq.publish holds the same rule): plain ASCII, so no event
# looks like tickq's to a consumer's eye, and nothing but the default begins with "tickq".
_SOURCE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
# What one EventBridge call takes: this many entries, whose sizes add up to CALL_BYTES at
# most, an entry's size being the UTF-8 bytes of its Source, DetailType and Detail (tickq sets
# no Time and no Resources, which would count too).
EVENTS_PER_CALL = 10
CALL_BYTES = 256 * 1024
# What a pass reads to fill its calls: a page of the oldest pending events, and past a full
# page each owner's oldest, about _HEADS in all and EVENTS_PER_CALL each at least, read again
# after _HEADS_CALLS calls (the events written since, another owner's too, are seen then).
_PAGE = 100
_HEADS = 2000
_HEADS_CALLS = 50
# What an event too big for a call keeps when it goes out reduced: its fields that take at
# most _SMALL_FIELD bytes as sent (neither objects nor lists), up to _SMALL_FIELDS in all.
_SMALL_FIELD = 256
_SMALL_FIELDS = 4096
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
    user_id: UUID | None = None  # its owner, whose share of the calls it takes

    @property
    def order_key(self) -> UUID:
        """What the order is kept within: the job, or the event alone when it has none."""
        return self.job_id or self.event_id

    def body(self) -> str:
        """The detail as sent: the stored one with the event's stable id added."""
        return json.dumps({**self.detail, "event_id": str(self.event_id)})

    def size(self) -> int:
        """The bytes EventBridge counts for the event's entry: its Source, DetailType and
        detail as sent, UTF-8. The detail is sent ASCII-escaped: a non-ASCII character takes
        6 bytes ("\\u00e9"), one beyond the BMP 12."""
        return (
            len(self.source.encode()) + len(self.detail_type.encode()) + len(self.body().encode())
        )

    def reduced(self, size: int) -> Event:
        """The event as sent when its entry, `size` bytes, is too big for any call: a detail
        flagged `truncated`, with that `size`, its `job_id` (`event_id` is added as always)
        and its small fields (the flags win over fields of the same name). The full detail
        stays in the outbox, read by the event id."""
        kept: dict[str, Any] = {}
        room = _SMALL_FIELDS
        for key, value in self.detail.items():
            if isinstance(value, dict | list):
                continue
            field = len(json.dumps({key: value}).encode())
            if field <= min(_SMALL_FIELD, room):
                kept[key] = value
                room -= field
        job = None if self.job_id is None else str(self.job_id)
        flags = {"truncated": True, "job_id": job, "size": size}
        return dataclasses.replace(self, detail={**kept, **flags})


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
    reduced: int = 0  # published reduced, too big for any call (their detail stays here)

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
    from queue_core.policies.retention import parse_age

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
    if not _SOURCE_RE.fullmatch(source):
        raise InvalidJob(
            "source", "must be ASCII letters, digits and ._/- starting with a letter or digit"
        )
    if source.lower().startswith(TICKQ_SOURCE) and source != DEFAULT_USER_SOURCE:
        raise InvalidJob(
            "source", f"{source!r} is reserved: sources beginning with tickq are tickq's"
        )
    text = json_text.json_object(detail, "detail", _MAX_DETAIL_BYTES)
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
        self,
        *,
        pending_only: bool = False,
        job_id: UUID | str | None = None,
        event_id: UUID | str | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """Events newest first: pending ones or all, of one job, or the one whose `event_id`
        (in its detail as sent) is given, with its full detail (an event published reduced
        too)."""
        limit = validation.integer(limit, "limit", 1, 10_000)
        job = None if job_id is None else validation.uuid(job_id, "job_id")
        event = None if event_id is None else validation.uuid(event_id, "event_id")
        params = {"pending_only": pending_only, "job_id": job, "event_id": event, "limit": limit}
        return self._db.dicts("outbox_list", params)

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
    """Send pending events, the owners sharing the calls, until none is left, `time_left()`
    (seconds) runs out or `max_calls` calls were made. Each call is its own transaction
    under the publishers' lock: the events the bus accepted are marked published when it
    commits, the refused ones are retried with exponential backoff, then left pending (with
    the reason) and their jobs' later events held back for the next run."""
    db = Executor(conn)
    report = PublishReport()
    run = _Run()
    calls = 0
    while (max_calls is None or calls < max_calls) and (time_left is None or time_left() > 0):
        with db.atomic():
            if not db.rows("outbox_lock", {"key": LOCK_KEY})[0][0]:
                report.busy = True
                break
            picked = _pick(run.candidates(db), run.sent)
            if not picked:
                break
            chunk, reduced = _fill(run.read(db, picked))
            if not chunk:
                break  # another publisher sent them meanwhile: it has the backlog
            calls += 1
            refused = _send_with_retries(db, send, chunk, report, retries, sleep, time_left, now)
        run.sent_call(chunk, refused)
        report.reduced += len(reduced - {event.id for event in refused})
        report.held += len(refused)
        if len(refused) == len(chunk):
            # Nothing of a whole call got through its retries: the bus is down or refusing,
            # and the next call would cost the same retries again. The next run goes on.
            report.stopped = True
            break
    return report


@dataclass(frozen=True, slots=True)
class _Pending:
    """A pending event as a pass picks it: by its job, its owner, whether the bus refused it
    in an earlier run (attempts), its detail's stored size (what a call's bytes are guessed
    by before the detail is read) and the event itself once read."""

    id: int
    order_key: UUID
    user_id: UUID | None
    attempts: int
    stored: int
    event: Event | None = None


class _Run:
    """What one publisher run keeps between its calls: the jobs held back, how many events
    each owner has had sent, and, while the pending events fill more than a page, each
    owner's oldest ones (`outbox_heads`)."""

    def __init__(self) -> None:
        self.held: list[UUID] = []
        self.sent: dict[UUID | None, int] = {}
        self.heads: list[_Pending] | None = None
        self.partly: set[UUID | None] = set()  # owners with more pending than in heads
        self.heads_calls = 0  # calls made since the heads were read

    def candidates(self, db: Executor) -> list[_Pending]:
        """The events the next call picks from."""
        if self.heads is not None:
            held = set(self.held)
            left = [p for p in self.heads if p.order_key not in held]
            # Read the owners' oldest again when one known only in part has none left, or
            # after _HEADS_CALLS calls (events written since, of any owner).
            if (
                left
                and self.partly <= {p.user_id for p in left}
                and self.heads_calls < _HEADS_CALLS
            ):
                return left
            self.heads = None
        rows = db.rows("outbox_pending", {"held": self.held, "limit": _PAGE, "bytes": CALL_BYTES})
        page = [_paged(row) for row in rows]
        if len(page) < _PAGE:
            return page  # every pending event
        # A backlog past the page: the oldest are one owner's, maybe, and others' lie beyond.
        rows = db.rows(
            "outbox_heads", {"held": self.held, "least": EVENTS_PER_CALL, "most": _HEADS}
        )
        self.heads = [_Pending(*row[:5]) for row in rows]
        self.heads_calls = 0
        known: dict[UUID | None, int] = {}
        for p in self.heads:
            known[p.user_id] = known.get(p.user_id, 0) + 1
        self.partly = {row[2] for row in rows if row[5] > known[row[2]]}
        return self.heads

    def read(self, db: Executor, picked: list[_Pending]) -> list[Event]:
        """The picked events, in order, their details read by id where the page had none."""
        missing = [p.id for p in picked if p.event is None]
        found: dict[int, Event] = {}
        if missing:
            for id_, event_id, job_id, user_id, source, detail_type, detail, attempts in db.rows(
                "outbox_events", {"ids": missing}
            ):
                found[id_] = Event(
                    id_, event_id, job_id, source, detail_type, detail, attempts, user_id
                )
            gone = set(missing) - set(found)
            if gone and self.heads is not None:
                self.heads = [p for p in self.heads if p.id not in gone]
        return [
            p.event if p.event is not None else found[p.id]
            for p in picked
            if p.event is not None or p.id in found
        ]

    def sent_call(self, chunk: list[Event], refused: list[Event]) -> None:
        """Count a call's events to their owners; forget the accepted, hold the refused."""
        for event in chunk:
            self.sent[event.user_id] = self.sent.get(event.user_id, 0) + 1
        self.heads_calls += 1
        self.held += [event.order_key for event in refused]
        if self.heads is not None:
            done = {event.id for event in chunk} - {event.id for event in refused}
            self.heads = [p for p in self.heads if p.id not in done]


def _paged(row: Sequence[Any]) -> _Pending:
    """A row of outbox_pending: the event too when its detail was read along."""
    id_, event_id, job_id, user_id, source, detail_type, attempts, stored, detail = row
    event = (
        None
        if detail is None
        else Event(id_, event_id, job_id, source, detail_type, detail, attempts, user_id)
    )
    return _Pending(id_, job_id or event_id, user_id, attempts, stored, event)


def _pick(pending: Sequence[_Pending], sent: Mapping[UUID | None, int]) -> list[_Pending]:
    """The events of the next call, before their sizes are known: in the fair order, one per
    job (a job's next event waits for the next call, after its first was accepted), at most
    EVENTS_PER_CALL, while their stored sizes add up to a call's bytes at most."""
    picked: list[_Pending] = []
    seen: set[UUID] = set()
    stored = 0
    for event in _fair_order(pending, sent):
        if event.order_key in seen:
            continue
        seen.add(event.order_key)
        if picked and stored + event.stored > CALL_BYTES:
            continue
        picked.append(event)
        stored += event.stored
        if len(picked) == EVENTS_PER_CALL:
            break
    return picked


def _fair_order(pending: Sequence[_Pending], sent: Mapping[UUID | None, int]) -> list[_Pending]:
    """Round robin over owners: an owner's n-th event here goes as its (sent + n)-th of the
    run, ties in id order. Within an owner, the jobs the bus refused an event of in an
    earlier run go after the others, and each job's events stay in id order."""
    behind: set[UUID] = set()
    flagged: list[tuple[bool, _Pending]] = []
    for event in sorted(pending, key=lambda p: p.id):
        if event.attempts:
            behind.add(event.order_key)
        flagged.append((event.order_key in behind, event))
    flagged.sort(key=lambda f: (f[0], f[1].id))
    turns = dict(sent)
    keyed: list[tuple[int, bool, int, _Pending]] = []
    for late, event in flagged:
        turns[event.user_id] = turns.get(event.user_id, 0) + 1
        keyed.append((turns[event.user_id], late, event.id, event))
    keyed.sort(key=lambda k: k[:3])
    return [k[3] for k in keyed]


def _fill(events: Sequence[Event]) -> tuple[list[Event], set[int]]:
    """The call: the events, in order, whose sizes add up to CALL_BYTES at most (those that do
    not fit wait for the next call), each too big for any call reduced; and the ids of
    those reduced."""
    chunk: list[Event] = []
    reduced: set[int] = set()
    total = 0
    for event in events:
        size = event.size()
        too_big = size > CALL_BYTES
        if too_big:
            event = event.reduced(size)
            size = event.size()
        if total + size > CALL_BYTES:
            continue
        chunk.append(event)
        total += size
        if too_big:
            reduced.add(event.id)
    return chunk, reduced


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
