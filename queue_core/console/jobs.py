"""What the operator console asks of the queue: filtered job lists and bulk actions.

Users act on their own jobs (row-level security, one statement per job, as a single
retry or cancel would); operators act on every user's jobs through the security-definer
functions of queue_core/schema/functions/, which return what identifies a job, how it went,
its graph and its steps by name, never its payload, its result or a step's result.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

import psycopg

from queue_core.errors import InvalidJob, InvalidTransition, JobNotFound, TickqError
from queue_core.model import validation
from queue_core.model.dependencies import family
from queue_core.model.gates import GateView
from queue_core.model.jobs import Status, is_suspended
from queue_core.model.pages import check_page_limit, decode_cursor, fit_page
from queue_core.model.timed_out import timed_out_view
from queue_core.postgres.executor import Executor, StaleCount, translate_errors
from queue_core.postgres.reads import relatives_of
from queue_core.postgres.statements import QUERIES
from queue_core.postgres.steps import durable_view
from queue_core.store.port import Store

MAX_BULK = 500  # ids in one bulk request: a page of the list
MAX_ERROR_FILTER = 200


class BulkAction(StrEnum):
    RETRY = "retry"
    CANCEL = "cancel"


class CountChanged(TickqError):
    """The jobs changed since they were counted; nothing was done."""

    def __init__(self, expected: int, current: int) -> None:
        self.expected = expected
        self.current = current
        super().__init__(
            f"{expected} dead jobs were confirmed but {current} match now; nothing was retried"
        )


@dataclass(frozen=True, slots=True)
class JobFilter:
    """The list's filters, validated; None means "any"."""

    statuses: tuple[str, ...] | None = None
    types: tuple[str, ...] | None = None
    queues: tuple[str, ...] | None = None
    groups: tuple[str, ...] | None = None
    error: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None

    @classmethod
    def of(
        cls,
        *,
        statuses: Iterable[Any] | None = None,
        types: Iterable[Any] | None = None,
        queues: Iterable[Any] | None = None,
        groups: Iterable[Any] | None = None,
        error: Any = None,
        created_from: Any = None,
        created_to: Any = None,
    ) -> JobFilter:
        known = {s.value for s in Status}
        if statuses is not None:
            statuses = tuple(statuses)
            unknown = sorted(str(s) for s in statuses if s not in known)
            if unknown:
                raise InvalidJob("status", f"unknown statuses {unknown}; known: {sorted(known)}")
        start = None if created_from is None else validation.aware_datetime(created_from, "from")
        end = None if created_to is None else validation.aware_datetime(created_to, "to")
        if start is not None and end is not None and end <= start:
            raise InvalidJob("to", "must be after from")
        return cls(
            statuses=None if statuses is None else tuple(statuses),
            types=_names(types, "type"),
            queues=_names(queues, "queue"),
            groups=_names(groups, "group"),
            error=None if error is None else validation.text(error, "error", MAX_ERROR_FILTER),
            created_from=start,
            created_to=end,
        )

    def params(self) -> dict[str, Any]:
        return {
            "statuses": _list(self.statuses),
            "types": _list(self.types),
            "queues": _list(self.queues),
            "groups": _list(self.groups),
            "error": self.error,
            "created_from": self.created_from,
            "created_to": self.created_to,
        }


@dataclass(frozen=True, slots=True)
class ActionResult:
    """What a bulk action did to one job: `outcome` is retried, cancelled, asked to stop,
    compensating (a saga that runs its undos before it ends cancelled), not found, not
    retryable, not cancellable, parents unfinished or key taken; `status` is the job's
    status after it (or before, when nothing changed)."""

    id: UUID
    outcome: str
    status: str | None = None
    reason: str | None = None  # why a user's job was refused (its key is held, a parent...)

    @property
    def changed(self) -> bool:
        return self.outcome in ("retried", "cancelled", "asked to stop")

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "outcome": self.outcome,
            "status": self.status,
            "changed": self.changed,
        }


@dataclass(frozen=True, slots=True)
class OperatorJobs:
    """A page of every user's jobs, as dictionaries of the operator's columns: as every
    list of jobs (queue_core/model/pages.py), a large progress left out and the error cut (named
    in "truncated"), the page cut short at pages.MAX_PAGE_BYTES."""

    jobs: list[dict[str, Any]] = field(default_factory=list)
    next_cursor: str | None = None


def job_ids(values: Any) -> list[UUID]:
    """A bulk request's ids: a non-empty list of at most MAX_BULK UUIDs."""
    if not isinstance(values, list | tuple) or not values:
        raise InvalidJob("ids", "must be a non-empty list of job ids")
    if len(values) > MAX_BULK:
        raise InvalidJob("ids", f"at most {MAX_BULK} jobs at once, got {len(values)}")
    return list(dict.fromkeys(validation.uuid(v, "ids") for v in values))


def act_as_user(store: Store, action: BulkAction, ids: Sequence[UUID]) -> list[ActionResult]:
    """Retry or cancel the store user's own jobs, one statement each, saying what happened
    to each: another user's job is simply not found."""
    results = []
    for job_id in ids:
        try:
            job = store.retry(job_id) if action is BulkAction.RETRY else store.cancel(job_id)
        except JobNotFound:
            results.append(ActionResult(job_id, "not found"))
            continue
        except InvalidTransition as exc:
            refused = "not retryable" if action is BulkAction.RETRY else "not cancellable"
            results.append(ActionResult(job_id, refused, str(exc.status), str(exc)))
            continue
        if action is BulkAction.RETRY:
            results.append(ActionResult(job_id, "retried", job.status.value))
        else:
            outcome = "asked to stop" if job.cancel_requested else "cancelled"
            results.append(ActionResult(job_id, outcome, job.status.value))
    return results


@contextmanager
def as_operator(conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    """One transaction acting as tickq_operator (which may only call the console's and the
    operator counts' functions), for a login that is a member of it."""
    with translate_errors(), conn.transaction():
        conn.execute(QUERIES["role_operator"])
        yield conn


class OperatorConsole:
    """Every user's jobs, for operators, through the functions tickq_operator may call."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._db = Executor(conn)

    def jobs(
        self, job_filter: JobFilter, *, limit: int = 50, cursor: str | None = None
    ) -> OperatorJobs:
        check_page_limit(limit)
        after_created, after_id = decode_cursor(cursor) if cursor else (None, None)
        params = {
            **job_filter.params(),
            "after_created": after_created,
            "after_id": after_id,
            "limit": limit + 1,
        }
        rows = self._db.dicts("operator_jobs", params)
        return OperatorJobs(*fit_page([_with_state(_jsonable(r)) for r in rows], limit))

    def job(self, job_id: UUID | str) -> dict[str, Any]:
        """One job of any user as its detail shows it, in the shape of the owner's: the
        list's columns and the error history, its parents and children ("after",
        "children") and its durable side (resumes, the wait, steps and signals by name, time
        and size), its timeout and how a timed-out attempt was stopped. Never the payload, the
        result, a step's result or a signal's payload."""
        params = {"id": validation.uuid(job_id, "id")}
        rows = self._db.dicts("operator_job", params)
        if not rows:
            raise JobNotFound(job_id)
        gates = self._db.rows("operator_job_gate", params)
        gate = [GateView(kind, None, enqueues).to_dict() for kind, enqueues in gates]
        durable = durable_view(self._db.rows("operator_job_durable", params), job_id)
        relatives = relatives_of(self._db.rows("operator_job_relatives", params))
        job = _with_state(_jsonable(rows[0]), durable.wait is not None)
        return {
            **job,
            # A timed-out last attempt: after how long and how its handler was stopped.
            "timed_out": timed_out_view(job["error"]),
            **family(relatives),
            **durable.to_dict(),
            "gate": gate[0] if gate else None,
            # The key that alone keeps it from starting now (held, at its cap or its rate).
            "held_by_flow_key": self._db.rows("job_flow_waits", params)[0][0],
        }

    def act(
        self, action: BulkAction, ids: Sequence[UUID], *, now: datetime | None = None
    ) -> list[ActionResult]:
        name = "operator_retry" if action is BulkAction.RETRY else "operator_cancel"
        rows = self._db.rows(name, {"ids": list(ids), "now": now})
        by_id = {row[0]: ActionResult(row[0], row[2], row[1]) for row in rows}
        return [by_id[i] for i in ids]

    def count_dead(self, *, types: Iterable[str] | None, queues: Iterable[str] | None) -> int:
        params = {"types": _list(_names(types, "type")), "queues": _list(_names(queues, "queue"))}
        return int(self._db.rows("operator_count_dead", params)[0][0])

    def retry_dead(
        self,
        *,
        types: Iterable[str] | None,
        queues: Iterable[str] | None,
        expected: int,
        now: datetime | None = None,
    ) -> list[ActionResult]:
        """Retry every dead job of these types and queues, only if `expected` (the count the
        operator confirmed) still matches; CountChanged otherwise, with nothing changed."""
        confirmed = validation.integer(expected, "expected", 1, 1_000_000)
        params = {
            "types": _list(_names(types, "type")),
            "queues": _list(_names(queues, "queue")),
            "expected": confirmed,
            "now": now,
        }
        try:
            rows = self._db.rows("operator_retry_dead", params)
        except StaleCount as stale:
            raise CountChanged(confirmed, stale.current) from None
        return [ActionResult(row[0], row[2], row[1]) for row in rows]


def _names(values: Iterable[Any] | None, field_name: str) -> tuple[str, ...] | None:
    if values is None:
        return None
    names = tuple(validation.name(v, field_name) for v in values)
    return names or None


def _list(values: tuple[str, ...] | None) -> list[str] | None:
    return None if values is None else list(values)


def _with_state(row: dict[str, Any], suspended: bool | None = None) -> dict[str, Any]:
    """The row with its `state`, as Job.state: its status, but `suspended` for a job queued
    with a wait (its `wait_kind`, in a list's row; its durable side's wait, in the detail)."""
    if suspended is None:
        suspended = is_suspended(Status(row["status"]), row.get("wait_kind"))
    return {**row, "state": "suspended" if suspended else row["status"]}


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v.isoformat() if isinstance(v, datetime) else str(v) if isinstance(v, UUID) else v
        for k, v in row.items()
    }
