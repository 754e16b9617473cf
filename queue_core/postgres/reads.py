"""Reading the queue on PostgreSQL, and the operator's actions on single jobs: get, lists,
relatives, stats, cancel and retry."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any
from uuid import UUID

from queue_core.errors import InvalidJob, InvalidTransition, JobNotFound
from queue_core.model.dependencies import Relative
from queue_core.model.fairness import GroupStats
from queue_core.model.gates import GateView
from queue_core.model.jobs import JOB_COLUMNS, Job, Status, job_from_row
from queue_core.model.pages import check_page_limit, decode_cursor, encode_cursor, fit_page
from queue_core.postgres.executor import Executor, jobs
from queue_core.store.port import Listing, Page, StatsRow


class Reads:
    """The store's reads and single-job operations."""

    _db: Executor

    def get(self, job_id: UUID | str) -> Job:
        rows = self._db.rows("jobs_get", {"id": job_uuid(job_id)}, jobs)
        if not rows:
            raise JobNotFound(job_id)
        return rows[0]

    def gate_of(self, job_id: UUID | str) -> GateView | None:
        """The debounce or throttle that made a job, if one did (row-level security: only
        one's own jobs' gates)."""
        for kind, key, enqueues, first_at in self._db.rows("job_gate_of", {"id": job_uuid(job_id)}):
            return GateView(kind, key, enqueues, first_at)
        return None

    def flow_waits_for(self, job_id: UUID | str) -> str | None:
        """The flow key that keeps a runnable job from starting now (held, at its cap or
        its rate); None when its keys let it run (only one's own jobs, as the views)."""
        rows = self._db.rows("job_flow_waits", {"id": job_uuid(job_id)})
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    def traceparents(self, ids: Sequence[UUID]) -> dict[UUID, str]:
        """The enqueuers' trace contexts of these live jobs (the runner's, OpenTelemetry on:
        one read per batch)."""
        return dict(self._db.rows("jobs_traceparents", {"ids": list(ids)}))

    def relatives(self, job_id: UUID | str) -> list[Relative]:
        """A job's parents, then its children, each with its type and status."""
        return relatives_of(self._db.rows("job_relatives", {"id": job_uuid(job_id)}))

    def list_jobs(
        self,
        *,
        statuses: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        queues: Iterable[str] | None = None,
        user_id: UUID | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        check_page_limit(limit)
        after_created, after_id = decode_cursor(cursor) if cursor else (None, None)
        params = {
            "statuses": _statuses(statuses),
            "types": None if types is None else list(types),
            "queues": None if queues is None else list(queues),
            "user_id": user_id,
            "after_created": after_created,
            "after_id": after_id,
        }
        return self._page("jobs_list", params, limit)

    def search_jobs(
        self, filters: Mapping[str, Any], *, limit: int = 50, cursor: str | None = None
    ) -> Page:
        """list_jobs with the console's filters (`console.JobFilter.params()`)."""
        check_page_limit(limit)
        after_created, after_id = decode_cursor(cursor) if cursor else (None, None)
        params = {**filters, "after_created": after_created, "after_id": after_id}
        return self._page("jobs_search", params, limit)

    def search_listed(
        self, filters: Mapping[str, Any], *, limit: int = 50, cursor: str | None = None
    ) -> Listing:
        """search_jobs as lists show the jobs (queue_core/model/pages.py): the database leaves out
        the large values, so a page never reads one, and the page stops at MAX_PAGE_BYTES."""
        check_page_limit(limit)
        after_created, after_id = decode_cursor(cursor) if cursor else (None, None)
        params = {
            **filters,
            "after_created": after_created,
            "after_id": after_id,
            "limit": limit + 1,
        }
        found = self._db.rows("jobs_search_listed", params, _jobs_and_truncated)
        jobs, next_cursor = fit_page([{**j.to_dict(), "truncated": t} for j, t in found], limit)
        return Listing(jobs, next_cursor)

    def _page(self, statement: str, params: dict[str, Any], limit: int) -> Page:
        found = self._db.rows(statement, {**params, "limit": limit + 1}, jobs)
        next_cursor = encode_cursor(found[limit - 1]) if len(found) > limit else None
        return Page(found[:limit], next_cursor)

    def has_pending(self, queues: Sequence[str]) -> bool:
        return bool(self._db.rows("jobs_pending_exist", {"queues": list(queues)})[0][0])

    def stats(self, *, now: datetime | None = None) -> list[StatsRow]:
        rows = _stats(self._db.rows("jobs_stats", {"now": now}))
        if self._db.through_functions():  # an application's: it may not read flow keys
            return rows
        return self._without_flow_held(rows, now)

    def stats_all_users(self, *, now: datetime | None = None) -> list[StatsRow]:
        """`stats` over every user's jobs, for operator views on an application login.

        Counts only, through tickq.operator_stats: the login needs tickq_operator, never
        the worker role, so it can read no row of another user.
        """
        return self._without_flow_held(_stats(self._db.rows("operator_stats", {"now": now})), now)

    def _without_flow_held(self, rows: list[StatsRow], now: datetime | None) -> list[StatsRow]:
        """The rows with the runnable jobs that only a flow key holds back counted apart
        (flow_held, out of the depth) and out of the oldest runnable age: waiting that an
        operator or a downstream asked for is no backlog an alarm should fire on."""
        held = {
            (q, t, s): (n, None if age is None else float(age))
            for q, t, s, n, age in self._db.rows("jobs_stats_flow_held", {"now": now})
        }
        if not held:
            return rows
        out = []
        for row in rows:
            found = held.get((row.queue, row.type, row.status.value))
            if found is not None:
                row = replace(row, flow_held=found[0], oldest_runnable_seconds=found[1])
            out.append(row)
        return out

    def group_stats(self, *, now: datetime | None = None) -> list[GroupStats]:
        """Per queue and fairness group: waiting, running, oldest runnable age."""
        return _group_stats(self._db.rows("jobs_stats_groups", {"now": now}))

    def group_stats_all_users(self, *, now: datetime | None = None) -> list[GroupStats]:
        """`group_stats` over every user's jobs, counts only, as `stats_all_users` does."""
        return _group_stats(self._db.rows("operator_group_stats", {"now": now}))

    def now(self) -> datetime:
        value: datetime = self._db.rows("clock_now", {})[0][0]
        return value

    # The operator's actions on single jobs

    def cancel(self, job_id: UUID | str, *, now: datetime | None = None) -> Job:
        if self._db.through_functions():
            # The application login's cancel (tickq.cancel): refusals raise there.
            return self._db.rows("jobs_cancel_app", {"id": job_uuid(job_id)}, jobs)[0]
        rows = self._db.rows("jobs_cancel", {"ids": [job_uuid(job_id)], "now": now}, jobs)
        if rows:
            return rows[0]
        job = self.get(job_id)
        raise InvalidTransition(job.id, job.status, "cancel")

    def retry(self, job_id: UUID | str, *, now: datetime | None = None) -> Job:
        if self._db.through_functions():
            return self.retry_as_user(job_id)
        params = _retry_params(ids=[job_uuid(job_id)], statuses=["dead", "cancelled"], now=now)
        rows = self._db.rows("jobs_retry", params, jobs)
        if rows:
            return rows[0]
        job = self.get(job_id)
        if job.status in (Status.DEAD, Status.CANCELLED):
            for r in self.relatives(job.id):
                if r.relation == "parent" and r.status != Status.SUCCEEDED:
                    raise InvalidTransition(
                        job.id, job.status, f"retry (its parent {r.id} is {r.status.value})"
                    )
            raise InvalidTransition(
                job.id, job.status, "retry (its idempotency key is held by a live job)"
            )
        raise InvalidTransition(job.id, job.status, "retry")

    def retry_as_user(
        self, job_id: UUID | str, *, fresh: bool = False, from_step: str | None = None
    ) -> Job:
        """The application login's retry (tickq.retry): keeping the job's steps, forgetting
        them (fresh), or from a step, in one statement; refusals raise there."""
        params = {"id": job_uuid(job_id), "fresh": fresh, "from_step": from_step}
        return self._db.rows("jobs_retry_app", params, jobs)[0]

    def retry_dead(
        self,
        *,
        types: Iterable[str] | None = None,
        queues: Iterable[str] | None = None,
        limit: int = 1000,
        now: datetime | None = None,
    ) -> list[Job]:
        params = _retry_params(
            statuses=["dead"],
            types=None if types is None else list(types),
            queues=None if queues is None else list(queues),
            limit=limit,
            now=now,
        )
        return self._db.rows("jobs_retry", params, jobs)


def relatives_of(rows: Iterable[Sequence[Any]]) -> list[Relative]:
    """Relatives from rows of (relation, id, type, status), the columns of every view's
    graph statement (the owner's and the operator's)."""
    return [Relative(relation, id_, type_, Status(status)) for relation, id_, type_, status in rows]


def job_uuid(value: UUID | str) -> UUID:
    """A job id as given by a caller; one that is no UUID names no job."""
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except ValueError:
        raise JobNotFound(value) from None


def _stats(rows: list[Any]) -> list[StatsRow]:
    return [
        StatsRow(q, t, Status(s), c, None if age is None else float(age), suspended)
        for q, t, s, c, age, suspended in rows
    ]


def _group_stats(rows: list[Any]) -> list[GroupStats]:
    return [GroupStats(q, g, w, r, None if age is None else float(age)) for q, g, w, r, age in rows]


def _retry_params(**given: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"ids": None, "types": None, "queues": None, "limit": 1, "now": None}
    params.update(given)
    return params


def _statuses(statuses: Iterable[str] | None) -> list[str] | None:
    if statuses is None:
        return None
    values = list(statuses)
    for value in values:
        try:
            Status(value)
        except ValueError:
            allowed = ", ".join(s.value for s in Status)
            raise InvalidJob("status", f"{value!r} is not one of {allowed}") from None
    return values


def _jobs_and_truncated(rows: list[Any], at: int) -> list[tuple[Job, dict[str, int]]]:
    """A reading for jobs_search_listed: the job as the list shows it, then what it left out."""
    width = len(JOB_COLUMNS)
    return [(job_from_row(row[at : at + width]), row[at + width]) for row in rows]
