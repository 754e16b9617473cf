"""The store port: what the runner, the handler context and the shells need from a queue.

`PostgresStore` (the postgres package) is the production adapter; `MemoryStore`
(store/memory.py) is the pure transitions behind the same methods, for fast tests of the
runner. The model-based test holds both to `transitions`. Every time a store compares takes
an optional `now`; without it the store's own clock decides (the database's, in production).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from queue_core.model.dependencies import ParentRef, Relative
from queue_core.model.fairness import GroupStats
from queue_core.model.gates import GateView
from queue_core.model.job_batch import JobBatch
from queue_core.model.jobs import RUNNABLE, EnqueueResult, Job, JobSpec, Outcome, Status
from queue_core.model.steps import Durable, DurableView, WaitKind


@dataclass(frozen=True, slots=True)
class Page:
    jobs: list[Job]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Listing:
    """A page of jobs as lists show them (queue_core/model/pages.py): each a JSON-ready job with
    its large values left out and named in its "truncated", the page bounded in bytes."""

    jobs: list[dict[str, Any]]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class LimitsConfigured:
    types: bool
    queues: bool
    per_group: bool = False
    # Any flow limit or live hold (queue_core/model/flow.py): only then do claims read flow keys.
    flow: bool = False

    @property
    def any_claim_limit(self) -> bool:
        """Whether the claim must honour a limit (the plain statements' guard claims
        nothing then): a type limit, a cap per group, a flow limit or a live hold."""
        return self.types or self.per_group or self.flow


@dataclass(frozen=True, slots=True)
class LeaseState:
    lease_until: datetime
    cancel_requested: bool


@dataclass(frozen=True, slots=True)
class StatsRow:
    queue: str
    type: str
    status: Status
    count: int
    oldest_runnable_seconds: float | None
    # Of the queued, those suspended (queued with a wait): not runnable until it ends.
    suspended: int = 0
    # Of the runnable, those due that only a flow key keeps from starting now (held, at its
    # cap or its rate): waiting asked for, not backlog. oldest_runnable_seconds leaves them out.
    flow_held: int = 0

    @property
    def runnable(self) -> int:
        """The row's jobs a worker may claim now or after their backoff: its queue depth.
        A suspended job waits for a signal, a sleep, its children or a step's retry; a job
        only its flow key holds back waits for that key."""
        if self.status not in RUNNABLE:
            return 0
        return self.count - self.suspended - self.flow_held


class ClaimedBatch(Protocol):
    """The jobs one claim leased, parsed into Jobs (in claim order) on the first `jobs()`
    call, so a caller can parse them while the store runs its next statement."""

    def __len__(self) -> int: ...

    def jobs(self) -> list[Job]: ...

    def discard(self) -> None: ...


class JobList:
    """A ClaimedBatch whose jobs are already parsed (in claim order)."""

    __slots__ = ("_jobs",)

    def __init__(self, jobs: list[Job]) -> None:
        self._jobs = jobs

    def __len__(self) -> int:
        return len(self._jobs)

    def jobs(self) -> list[Job]:
        return self._jobs

    def discard(self) -> None:
        self._jobs = []


NO_JOBS: ClaimedBatch = JobList([])


class LeaseKeeper(Protocol):
    """The part of a store a running handler talks to: fenced by the job's lease token."""

    def extend_lease(
        self, job_id: UUID, lease_token: UUID, seconds: float, *, now: datetime | None = None
    ) -> LeaseState: ...

    def report_progress(
        self, job_id: UUID, lease_token: UUID, progress: Any, *, now: datetime | None = None
    ) -> bool: ...

    def hold_flow(self, job_id: UUID, lease_token: UUID, key: str, seconds: float) -> datetime:
        """Keep every job of flow key `key` from starting for `seconds` (at most a day),
        while the job still holds its lease; returns when the hold ends."""
        ...

    def parent_results(self, job_id: UUID) -> dict[UUID, Any]:
        """The results of the jobs `job_id` was enqueued after (dependencies), by id."""
        ...


class CompletableJob(Protocol):
    """The `job` of a transactional handler, as the completion in its transaction sees it."""

    @property
    def row(self) -> Job: ...

    @property
    def completed(self) -> Outcome | None:
        """The completion the handler made itself (complete_in), if it did."""
        ...

    def note_completed(self, outcome: Outcome) -> None: ...

    @property
    def events(self) -> frozenset[Status]:
        """The statuses whose events its task opted into: the completion writes them."""
        ...


class HandlerTransactions(Protocol):
    """The transactions transactional handlers run in, each on a connection of its own."""

    def run(self, job: CompletableJob, fn: Callable[..., Any]) -> Outcome:
        """`fn(job, conn)` and the job's fenced success commit together; what `fn` raises,
        or LeaseLost, rolls both back and is raised again."""
        ...

    def close(self) -> None: ...


class Store(LeaseKeeper, Protocol):
    """One queue, one session: enqueue, the worker's claim/finish cycle, and operations."""

    @property
    def autocommit(self) -> bool:
        """Whether each operation is its own transaction (not the caller's): only then may
        two threads' operations overlap on this store."""
        ...

    def task_catalog(self) -> dict[str, dict[str, Any]]:
        """The task catalogue's defaults by type (queue_core.model.catalog), for enqueues by a
        process without the handler's module."""
        ...

    def close(self) -> None:
        """Release the session (the connection, for PostgreSQL)."""

    # Enqueue

    def enqueue(self, spec: JobSpec, *, now: datetime | None = None) -> EnqueueResult: ...

    def enqueue_many(
        self, specs: Sequence[JobSpec], *, now: datetime | None = None
    ) -> list[EnqueueResult]: ...

    def enqueue_batch(
        self, batch: JobBatch, *, now: datetime | None = None
    ) -> list[EnqueueResult]: ...

    def enqueue_after(
        self,
        batch: JobBatch,
        after: Sequence[Sequence[ParentRef]],
        *,
        now: datetime | None = None,
    ) -> list[EnqueueResult]:
        """Enqueue jobs that wait for parents: `after[i]` names job i's parents (job ids, or
        positions of earlier jobs of the batch); all or nothing."""
        ...

    # The worker's cycle

    def claim(
        self,
        *,
        queues: Sequence[str] = ...,
        limit: int = ...,
        lease_seconds: int = ...,
        now: datetime | None = None,
        seed: bytes | None = None,
    ) -> list[Job]: ...

    def finish(self, outcomes: Sequence[Outcome], *, now: datetime | None = None) -> set[UUID]: ...

    def finish_and_claim(
        self,
        outcomes: Sequence[Outcome],
        *,
        queues: Sequence[str] = ...,
        limit: int = ...,
        lease_seconds: int = ...,
        now: datetime | None = None,
    ) -> tuple[set[UUID], list[Job]]: ...

    def finish_and_claim_unparsed(
        self,
        outcomes: Sequence[Outcome],
        *,
        queues: Sequence[str] = ...,
        limit: int = ...,
        lease_seconds: int = ...,
        now: datetime | None = None,
        seed: bytes | None = None,
    ) -> tuple[set[UUID], ClaimedBatch]:
        """`seed`: 16 random bytes the caller draws for this claim, from which the leases'
        tokens derive (none: the store draws one); kept by the caller while the statement is
        in flight, it finds the jobs again (`recover_claimed`) when the reply is lost."""
        ...

    def recover_claimed(
        self,
        seeds: Sequence[bytes],
        *,
        lease_seconds: int = ...,
        now: datetime | None = None,
    ) -> ClaimedBatch:
        """The jobs still running under leases that claims drawn from `seeds` gave them
        (claims whose replies the caller never read), as claimed: lease renewed, attempts
        unchanged. A job reclaimed or leased again meanwhile holds another token and is not
        among them."""
        ...

    def reclaim(self, *, limit: int = ..., now: datetime | None = None) -> list[Job]: ...

    def settle_pending(self, *, rounds: int = ..., now: datetime | None = None) -> int: ...

    def complete(self, job: Job, result: Any = None, *, now: datetime | None = None) -> None: ...

    def fail(
        self, job: Job, error: str, *, permanent: bool = False, now: datetime | None = None
    ) -> None: ...

    def handler_transactions(self) -> HandlerTransactions:
        """Transactions for transactional handlers on connections like this store's."""
        ...

    # Waking idle workers

    def listen_for_jobs(self) -> bool: ...

    def unlisten_jobs(self) -> None: ...

    def wait_for_jobs(self, timeout: float) -> bool: ...

    # Reading and operating

    def get(self, job_id: UUID | str) -> Job: ...

    def traceparents(self, ids: Sequence[UUID]) -> dict[UUID, str]:
        """The trace contexts their enqueuers recorded on these live jobs (OpenTelemetry
        on); a store that keeps none has none."""
        return {}

    def list_jobs(
        self,
        *,
        statuses: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        queues: Iterable[str] | None = None,
        user_id: UUID | None = None,
        limit: int = ...,
        cursor: str | None = None,
    ) -> Page: ...

    def cancel(self, job_id: UUID | str, *, now: datetime | None = None) -> Job: ...

    def retry(self, job_id: UUID | str, *, now: datetime | None = None) -> Job: ...

    def retry_dead(
        self,
        *,
        types: Iterable[str] | None = None,
        queues: Iterable[str] | None = None,
        limit: int = ...,
        now: datetime | None = None,
    ) -> list[Job]: ...

    def has_pending(self, queues: Sequence[str]) -> bool:
        """Whether any job of these queues is waiting or running (a drained queue says no)."""
        ...

    def stats(self, *, now: datetime | None = None) -> list[StatsRow]: ...

    def now(self) -> datetime: ...

    # What the shells show besides

    def relatives(self, job_id: UUID | str) -> list[Relative]:
        """A job's parents, then its children."""
        ...

    def gate_of(self, job_id: UUID | str) -> GateView | None:
        """The debounce or throttle that made a job, if one did."""
        ...

    def flow_waits_for(self, job_id: UUID | str) -> str | None:
        """The flow key that keeps a runnable job from starting now, if one does."""
        ...

    def search_jobs(
        self, filters: Mapping[str, Any], *, limit: int = ..., cursor: str | None = None
    ) -> Page:
        """list_jobs with the console's filters (`console.JobFilter.params()`)."""
        ...

    def search_listed(
        self, filters: Mapping[str, Any], *, limit: int = ..., cursor: str | None = None
    ) -> Listing:
        """search_jobs as lists show the jobs (the API's GET /jobs): large values left out,
        the page cut short at pages.MAX_PAGE_BYTES of JSON, its cursor after the last job
        it holds."""
        ...

    def stats_all_users(self, *, now: datetime | None = None) -> list[StatsRow]:
        """`stats` over every user's jobs (counts only), for operator views."""
        ...

    def group_stats(self, *, now: datetime | None = None) -> list[GroupStats]: ...

    def group_stats_all_users(self, *, now: datetime | None = None) -> list[GroupStats]: ...

    # Durable steps

    @property
    def steps(self) -> StepOperations:
        """This store's durable-step operations, on the same session and user scope."""
        ...


class StepOperations(Protocol):
    """Durable steps: fenced step writes and suspension for a running job (the runner's step
    context), signals, the view of one job and the retry that may forget its steps (the
    shells)."""

    def load(
        self,
        job_id: UUID,
        lease_token: UUID,
        *,
        code_version: str | None = None,
        now: datetime | None = None,
    ) -> tuple[Durable, datetime]:
        """The running job's stored steps and signals, and the store's clock; records the
        run's code version on the job in the same statement."""
        ...

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
        """Store a step's result with the code version that ran it, fenced by the lease
        (marked compensable when the step has an undo, so a job ended away from its handler
        compensates); returns when it finished."""
        ...

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
        """Send the running job back to the queue until `until` (or `delay` seconds from
        now); returns when it may run again."""
        ...

    def patch_marked(
        self, job_id: UUID, lease_token: UUID, name: str, *, now: datetime | None = None
    ) -> None:
        """Record that the running job passed job.patched(name) under code with the call."""
        ...

    def signal(
        self, job_id: UUID | str, name: Any, payload: Any = None, *, now: datetime | None = None
    ) -> bool: ...

    def show(self, job_id: UUID | str) -> DurableView: ...

    def retry(
        self,
        job_id: UUID | str,
        *,
        fresh: bool,
        from_step: str | None = None,
        now: datetime | None = None,
    ) -> Job: ...

    # Durable workflows (docs/steps.md): step retries, undos, child jobs

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
        """Count a failed try and, with a delay, suspend until the next one (one commit)."""
        ...

    def undo_started(
        self, job_id: UUID, lease_token: UUID, name: str, *, now: datetime | None = None
    ) -> int: ...

    def undo_done(
        self, job_id: UUID, lease_token: UUID, name: str, *, now: datetime | None = None
    ) -> None: ...

    def compensation_begin(
        self,
        job_id: UUID,
        lease_token: UUID,
        *,
        ends: Status,
        error: str,
        spare: int,
        now: datetime | None = None,
    ) -> None: ...

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
        """Enqueue a step's children and suspend the parent until they end (one commit);
        QueueFull, writing nothing, when they would overflow `queue` (the parent's), or the
        cap there of `owner` (the parent's)."""
        ...

    def children(self, job_id: UUID, step: str) -> list[tuple[UUID, Status, Any, str | None]]: ...
