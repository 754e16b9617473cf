"""The store port over a dict of `Job` values, each change made by a pure transition.

For fast tests of what sits on the port (the runner's drain, its pipelining, the handler
context) without a database. It keeps the Postgres store's promises that the model-based
test checks (claim order, lease fencing, one live holder per idempotency key); it knows
nothing of row-level security (its "all users" views are its plain ones), limits, fairness
across groups (it claims in plain order), schedules or retention. Two parts of the port it
refuses with ConfigurationError, since only a database keeps them: dependencies
(`enqueue_after`; so no job of it has parents, children or parent results) and durable
steps (`steps`, whose every operation is a committed, fenced write).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn
from uuid import UUID

from queue_core.errors import ConfigurationError, InvalidTransition, JobNotFound, LeaseLost
from queue_core.model import dependencies, flow, json_text, transitions
from queue_core.model.fairness import GroupStats
from queue_core.model.gates import GateView
from queue_core.model.ids import new_id
from queue_core.model.job_batch import JobBatch
from queue_core.model.jobs import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_QUEUE,
    KEY_HOLDING,
    RUNNABLE,
    EnqueueResult,
    Job,
    JobSpec,
    Outcome,
    Status,
)
from queue_core.model.pages import check_page_limit, decode_cursor, encode_cursor, fit_page, listed
from queue_core.model.steps import Durable, DurableView, WaitKind
from queue_core.store.derived import DerivedOperations
from queue_core.store.port import (
    ClaimedBatch,
    HandlerTransactions,
    JobList,
    LeaseState,
    Listing,
    Page,
    StatsRow,
    Store,
)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class MemoryStore(DerivedOperations):
    """A queue in this process. Safe to share between threads (one lock), and autocommit:
    every operation is whole on its own."""

    autocommit = True

    def __init__(self, *, clock: Callable[[], datetime] = _utc_now) -> None:
        self._clock = clock
        self._jobs: dict[UUID, Job] = {}
        # Flow keys held by handlers (job.hold_flow): key -> until.
        self._flow_holds: dict[str, datetime] = {}
        self._lock = threading.Lock()
        self._enqueued = threading.Event()
        self.calls: list[str] = []  # the operations run, in order, for tests of callers
        self.batch_ids: dict[UUID, UUID] = {}  # job -> the batch handler call it was in

    def task_catalog(self) -> dict[str, dict[str, Any]]:
        """No catalogue: the model's enqueues name their settings."""
        return {}

    def close(self) -> None:
        """Nothing to release: the jobs live as long as the object."""

    def now(self) -> datetime:
        return self._clock()

    # Enqueue

    def enqueue(self, spec: JobSpec, *, now: datetime | None = None) -> EnqueueResult:
        with self._lock:
            self.calls.append("enqueue")
            return self._insert(spec, now or self._clock())

    def enqueue_many(
        self, specs: Sequence[JobSpec], *, now: datetime | None = None
    ) -> list[EnqueueResult]:
        with self._lock:
            self.calls.append("enqueue_many")
            at = now or self._clock()
            return [self._bare(self._insert(spec, at)) for spec in specs]

    def enqueue_batch(self, batch: JobBatch, *, now: datetime | None = None) -> list[EnqueueResult]:
        return self.enqueue_many(batch.specs(), now=now)

    def enqueue_after(
        self,
        batch: JobBatch,
        after: Sequence[Sequence[dependencies.ParentRef]],
        *,
        now: datetime | None = None,
    ) -> list[EnqueueResult]:
        """Refused: this store keeps no dependencies (releasing and cancelling children is
        the database's work), so it enqueues nothing rather than jobs that never wait."""
        raise ConfigurationError("jobs enqueued after others need the Postgres store")

    def _insert(self, spec: JobSpec, now: datetime) -> EnqueueResult:
        if spec.gate is not None:
            raise ConfigurationError(f"{spec.gate.kind} needs the Postgres store")
        holder = self._holder(spec.idempotency_key, spec.user_id)
        if holder is not None:
            return EnqueueResult(holder.id, holder.status, True, holder)
        job = transitions.new_job(spec, id=new_id(), now=now)
        self._jobs[job.id] = job
        self._enqueued.set()
        return EnqueueResult(job.id, job.status, False, job)

    @staticmethod
    def _bare(result: EnqueueResult) -> EnqueueResult:
        """enqueue_many's results carry no rows, as the Postgres store's do not."""
        return EnqueueResult(result.id, result.status, result.duplicate)

    def _holder(
        self, key: str | None, user_id: UUID | None, *, but: UUID | None = None
    ) -> Job | None:
        if key is None:
            return None
        for job in self._jobs.values():
            if (
                job.idempotency_key == key
                and job.user_id == user_id
                and job.status in KEY_HOLDING
                and job.id != but
            ):
                return job
        return None

    # The worker's cycle

    def finish_and_claim_unparsed(
        self,
        outcomes: Sequence[Outcome],
        *,
        queues: Sequence[str] = (DEFAULT_QUEUE,),
        limit: int = 10,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        now: datetime | None = None,
        seed: bytes | None = None,
    ) -> tuple[set[UUID], ClaimedBatch]:
        """Outcomes first, then the claim; a job finished here is not claimed again by the
        same call (in SQL it still reads as running in the statement's snapshot)."""
        with self._lock:
            self.calls.append(f"finish_and_claim({len(outcomes)}, {limit})")
            at = now or self._clock()
            finished: set[UUID] = set()
            held: set[UUID] = set()
            for outcome in outcomes:
                job = self._jobs.get(outcome.job_id)
                if job is None or outcome.stored:  # stored when it happened
                    continue
                try:
                    self._jobs[job.id] = transitions.finish(job, outcome, now=at)
                except LeaseLost:
                    continue
                held.add(job.id)
                finished.add(job.id)
                if outcome.batch_id is not None:
                    self.batch_ids[job.id] = outcome.batch_id
            runnable = sorted(
                (
                    j
                    for j in self._jobs.values()
                    if j.queue in queues and j.id not in finished and transitions.is_runnable(j, at)
                ),
                key=transitions.claim_order,
            )
            if self._flow_holds:  # a held key's jobs wait (the memory store sets no limits)
                runnable = flow.admit(
                    [(j, j.flow_keys) for j in runnable],
                    limits=(),
                    running={},
                    starts={},
                    holds=self._flow_holds,
                    now=at,
                )
            claimed = []
            drawn = seed or os.urandom(16)  # the tokens derive from one seed, as in SQL
            for job in runnable[:limit]:
                token = transitions.lease_token(drawn, job.id)
                leased = transitions.claim(job, now=at, lease_seconds=lease_seconds, token=token)
                self._jobs[job.id] = leased
                claimed.append(leased)
            return held, JobList(claimed)

    def recover_claimed(
        self,
        seeds: Sequence[bytes],
        *,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        now: datetime | None = None,
    ) -> ClaimedBatch:
        with self._lock:
            self.calls.append(f"recover_claimed({len(seeds)})")
            at = now or self._clock()
            found = [
                transitions.recovered(job, now=at, lease_seconds=lease_seconds)
                for job in self._jobs.values()
                if job.status is Status.RUNNING
                and any(job.lease_token == transitions.lease_token(s, job.id) for s in seeds)
            ]
            for job in found:
                self._jobs[job.id] = job
            return JobList(sorted(found, key=transitions.claim_order))

    def reclaim(self, *, limit: int = 1000, now: datetime | None = None) -> list[Job]:
        with self._lock:
            self.calls.append("reclaim")
            at = now or self._clock()
            expired = [j for j in self._jobs.values() if transitions.is_reclaimable(j, at)]
            back = [transitions.reclaim(job, now=at) for job in expired[:limit]]
            for job in back:
                self._jobs[job.id] = job
            for key in [k for k, until in self._flow_holds.items() if until <= at][:limit]:
                del self._flow_holds[key]  # ended holds go, as the PostgreSQL reclaim's
            return back

    def settle_pending(self, *, rounds: int = 50, now: datetime | None = None) -> int:
        """Nothing is ever left: this store settles every child in the finishing call."""
        return 0

    def extend_lease(
        self, job_id: UUID, lease_token: UUID, seconds: float, *, now: datetime | None = None
    ) -> LeaseState:
        with self._lock:
            job = self._leased(job_id)
            at = now or self._clock()
            job = self._jobs[job_id] = transitions.extend_lease(
                job, token=lease_token, seconds=seconds, now=at
            )
            assert job.lease_until is not None
            return LeaseState(job.lease_until, job.cancel_requested)

    def parent_results(self, job_id: UUID) -> dict[UUID, Any]:
        """Always empty: this store has no dependencies, so no job has parents."""
        with self._lock:
            if job_id not in self._jobs:
                raise JobNotFound(job_id)
        return {}

    def report_progress(
        self, job_id: UUID, lease_token: UUID, progress: Any, *, now: datetime | None = None
    ) -> bool:
        with self._lock:
            job = self._leased(job_id)
            # Validated as the Postgres store validates it, then stored as jsonb reads back.
            value = json.loads(json_text.json_value(progress, "progress"))
            at = now or self._clock()
            self._jobs[job_id] = transitions.report_progress(
                job, token=lease_token, progress=value, now=at
            )
            return job.cancel_requested

    def hold_flow(self, job_id: UUID, lease_token: UUID, key: str, seconds: float) -> datetime:
        with self._lock:
            job = self._leased(job_id)
            if job.lease_token != lease_token or job.status is not Status.RUNNING:
                raise LeaseLost(job_id)
            name = flow.key(key, "key", flow.MAX_STORED_KEY)
            until = self._clock() + timedelta(seconds=flow.hold_seconds(seconds))
            self._flow_holds[name] = max(until, self._flow_holds.get(name, until))
            return self._flow_holds[name]

    def _leased(self, job_id: UUID) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise LeaseLost(job_id)
        return job

    # Waking idle workers

    def listen_for_jobs(self) -> bool:
        return True

    def unlisten_jobs(self) -> None:
        self._enqueued.clear()

    def wait_for_jobs(self, timeout: float) -> bool:
        woken = self._enqueued.wait(max(timeout, 0.0))
        self._enqueued.clear()
        return woken

    # Reading and operating

    def get(self, job_id: UUID | str) -> Job:
        with self._lock:
            return self._get(job_id)

    def traceparents(self, ids: Sequence[UUID]) -> dict[UUID, str]:
        """None: the in-memory store records no trace context."""
        return {}

    def _get(self, job_id: UUID | str) -> Job:
        try:
            job = self._jobs.get(job_id if isinstance(job_id, UUID) else UUID(str(job_id)))
        except ValueError:
            raise JobNotFound(job_id) from None
        if job is None:
            raise JobNotFound(job_id)
        return job

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
        wanted = None if statuses is None else {Status(s) for s in statuses}
        types_, queues_ = _set(types), _set(queues)
        return self._page(
            lambda j: (
                (wanted is None or j.status in wanted)
                and (types_ is None or j.type in types_)
                and (queues_ is None or j.queue in queues_)
                and (user_id is None or j.user_id == user_id)
            ),
            limit,
            cursor,
        )

    def search_jobs(
        self, filters: Mapping[str, Any], *, limit: int = 50, cursor: str | None = None
    ) -> Page:
        """list_jobs with the console's filters (`console.JobFilter.params()`): the error
        filter matches a part of the last error, ignoring case."""
        check_page_limit(limit)
        wanted = _set(filters.get("statuses"))
        types_, queues_, groups = (_set(filters.get(f)) for f in ("types", "queues", "groups"))
        error = filters.get("error")
        start, end = filters.get("created_from"), filters.get("created_to")
        return self._page(
            lambda j: (
                (wanted is None or j.status.value in wanted)
                and (types_ is None or j.type in types_)
                and (queues_ is None or j.queue in queues_)
                and (groups is None or j.group_key in groups)
                and (error is None or (j.error is not None and error.lower() in j.error.lower()))
                and (start is None or j.created_at >= start)
                and (end is None or j.created_at < end)
            ),
            limit,
            cursor,
        )

    def search_listed(
        self, filters: Mapping[str, Any], *, limit: int = 50, cursor: str | None = None
    ) -> Listing:
        """search_jobs as lists show the jobs (pages.listed), the page cut short at
        pages.MAX_PAGE_BYTES."""
        page = self.search_jobs(filters, limit=limit, cursor=cursor)
        entries, cut = fit_page([listed(job) for job in page.jobs], limit)
        return Listing(entries, page.next_cursor if cut is None else cut)

    def _page(self, keep: Callable[[Job], bool], limit: int, cursor: str | None) -> Page:
        """The kept jobs, newest first, after the cursor's job."""
        after = decode_cursor(cursor) if cursor else None
        with self._lock:
            jobs = sorted(self._jobs.values(), key=lambda j: (j.created_at, j.id), reverse=True)
        jobs = [j for j in jobs if keep(j) and (after is None or (j.created_at, j.id) < after)]
        next_cursor = encode_cursor(jobs[limit - 1]) if len(jobs) > limit else None
        return Page(jobs[:limit], next_cursor)

    def relatives(self, job_id: UUID | str) -> list[dependencies.Relative]:
        """Always empty: no job of this store is enqueued after another."""
        return []

    def gate_of(self, job_id: UUID | str) -> GateView | None:
        """Always None: this store refuses debounce and throttle."""
        return None

    def flow_waits_for(self, job_id: UUID | str) -> str | None:
        """A held key of a runnable job (this store sets no flow limits, only holds)."""
        with self._lock:
            job = self._get(job_id)
            at = self._clock()
            if not transitions.is_runnable(job, at):
                return None
            return next((k for k in job.flow_keys if self._flow_holds.get(k, at) > at), None)

    def cancel(self, job_id: UUID | str, *, now: datetime | None = None) -> Job:
        with self._lock:
            job = self._get(job_id)
            job = self._jobs[job.id] = transitions.cancel(job, now=now or self._clock())
            return job

    def retry(self, job_id: UUID | str, *, now: datetime | None = None) -> Job:
        with self._lock:
            job = self._get(job_id)
            if job.status in (Status.DEAD, Status.CANCELLED) and self._holder(
                job.idempotency_key, job.user_id, but=job.id
            ):
                raise InvalidTransition(
                    job.id, job.status, "retry (its idempotency key is held by a live job)"
                )
            job = self._jobs[job.id] = transitions.retry(job, now=now or self._clock())
            return job

    def retry_dead(
        self,
        *,
        types: Iterable[str] | None = None,
        queues: Iterable[str] | None = None,
        limit: int = 1000,
        now: datetime | None = None,
    ) -> list[Job]:
        types_, queues_ = _set(types), _set(queues)
        with self._lock:
            at = now or self._clock()
            dead = sorted(
                (
                    j
                    for j in self._jobs.values()
                    if j.status == Status.DEAD
                    and (types_ is None or j.type in types_)
                    and (queues_ is None or j.queue in queues_)
                ),
                key=lambda j: (j.finished_at or at, j.id),
                reverse=True,  # the newest of several sharing a key is the one retried
            )[:limit]
            retried = []
            for job in dead:
                if self._holder(job.idempotency_key, job.user_id, but=job.id) is None:
                    self._jobs[job.id] = transitions.retry(job, now=at)
                    retried.append(self._jobs[job.id])
            return retried

    def has_pending(self, queues: Sequence[str]) -> bool:
        with self._lock:
            return any(
                j.queue in queues and (j.status in RUNNABLE or j.status == Status.RUNNING)
                for j in self._jobs.values()
            )

    def stats(self, *, now: datetime | None = None) -> list[StatsRow]:
        with self._lock:
            at = now or self._clock()
            groups: dict[tuple[str, str, Status], list[Job]] = {}
            for job in self._jobs.values():
                groups.setdefault((job.queue, job.type, job.status), []).append(job)
        rows = []
        for (queue, type_, status), jobs in sorted(groups.items()):
            waiting = [j.run_after for j in jobs if transitions.is_runnable(j, at)]
            oldest = (at - min(waiting)).total_seconds() if waiting else None
            rows.append(StatsRow(queue, type_, status, len(jobs), oldest))
        return rows

    def stats_all_users(self, *, now: datetime | None = None) -> list[StatsRow]:
        """`stats`: without row-level security every user's jobs are this store's."""
        return self.stats(now=now)

    def group_stats(self, *, now: datetime | None = None) -> list[GroupStats]:
        """Per queue and fairness group with live jobs: waiting (runnable now), running,
        and the oldest runnable age."""
        with self._lock:
            at = now or self._clock()
            groups: dict[tuple[str, str], list[Job]] = {}
            for job in self._jobs.values():
                if job.status in RUNNABLE or job.status == Status.RUNNING:
                    groups.setdefault((job.queue, job.group_key), []).append(job)
        rows = []
        for (queue, group), jobs in sorted(groups.items()):
            waiting = [j.run_after for j in jobs if transitions.is_runnable(j, at)]
            oldest = (at - min(waiting)).total_seconds() if waiting else None
            running = sum(j.status == Status.RUNNING for j in jobs)
            rows.append(GroupStats(queue, group, len(waiting), running, oldest))
        return rows

    def group_stats_all_users(self, *, now: datetime | None = None) -> list[GroupStats]:
        return self.group_stats(now=now)

    @property
    def steps(self) -> NoSteps:
        return NO_STEPS

    def handler_transactions(self) -> HandlerTransactions:
        raise ConfigurationError("transactional handlers need the Postgres store")


class NoSteps:
    """MemoryStore's durable steps: none. A step is a committed write fenced by the lease
    token, which only the Postgres store keeps, so every operation refuses."""

    def load(
        self,
        job_id: UUID,
        lease_token: UUID,
        *,
        code_version: str | None = None,
        now: datetime | None = None,
    ) -> tuple[Durable, datetime]:
        _no_steps()

    def complete(
        self,
        job_id: UUID,
        lease_token: UUID,
        name: str,
        result_json: str,
        *,
        compensable: bool = False,
        code_version: str | None = None,
        now: datetime | None = None,
    ) -> datetime:
        _no_steps()

    def suspend(
        self,
        job_id: UUID,
        lease_token: UUID,
        *,
        kind: WaitKind,
        name: str | None = None,
        until: datetime | None = None,
        delay: float = 0.0,
        code_version: str | None = None,
        now: datetime | None = None,
    ) -> datetime:
        _no_steps()

    def patch_marked(
        self, job_id: UUID, lease_token: UUID, name: str, *, now: datetime | None = None
    ) -> None:
        _no_steps()

    def signal(
        self, job_id: UUID | str, name: Any, payload: Any = None, *, now: datetime | None = None
    ) -> bool:
        _no_steps()

    def show(self, job_id: UUID | str) -> DurableView:
        _no_steps()

    def retry(
        self,
        job_id: UUID | str,
        *,
        fresh: bool,
        from_step: str | None = None,
        now: datetime | None = None,
    ) -> Job:
        _no_steps()

    def step_failed(
        self,
        job_id: UUID,
        lease_token: UUID,
        *,
        kind: str,
        name: str,
        error: str,
        delay: float | None,
        add: int = 1,
        now: datetime | None = None,
    ) -> datetime | None:
        _no_steps()

    def undo_started(
        self, job_id: UUID, lease_token: UUID, name: str, *, now: datetime | None = None
    ) -> int:
        _no_steps()

    def undo_done(
        self, job_id: UUID, lease_token: UUID, name: str, *, now: datetime | None = None
    ) -> None:
        _no_steps()

    def compensation_begin(
        self,
        job_id: UUID,
        lease_token: UUID,
        *,
        ends: Status,
        error: str,
        spare: int,
        now: datetime | None = None,
    ) -> None:
        _no_steps()

    def enqueue_children(
        self,
        job_id: UUID,
        lease_token: UUID,
        *,
        step: str,
        specs: Sequence[JobSpec],
        max_running: int,
        queue: str | None = None,
        owner: UUID | None = None,
        now: datetime | None = None,
    ) -> datetime:
        _no_steps()

    def children(self, job_id: UUID, step: str) -> list[tuple[UUID, Status, Any, str | None]]:
        _no_steps()


NO_STEPS = NoSteps()


def _no_steps() -> NoReturn:
    raise ConfigurationError("durable steps need the Postgres store")


def _set(values: Iterable[str] | None) -> set[str] | None:
    return None if values is None else set(values)


# mypy holds the adapter to the port it implements.
_ADAPTS: type[Store] = MemoryStore
