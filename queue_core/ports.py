"""The store port: what the runner, the handler context and the shells need from a queue.

`PostgresStore` (store.py) is the production adapter; `MemoryStore` (memory_store.py) is
the pure transitions behind the same methods, for fast tests of the runner. The
model-based test holds both to `transitions`. Every time a store compares takes an
optional `now`; without it the store's own clock decides (the database's, in production).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from . import transitions
from .batch import JobBatch
from .errors import LeaseLost
from .jobs import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_QUEUE,
    EnqueueResult,
    Job,
    JobSpec,
    Outcome,
    Status,
)


@dataclass(frozen=True, slots=True)
class Page:
    jobs: list[Job]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class LimitsConfigured:
    types: bool
    queues: bool
    per_group: bool = False


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

    def parent_results(self, job_id: UUID) -> dict[UUID, Any]:
        """The results of the jobs `job_id` was enqueued after (dependencies), by id."""
        ...


class Store(LeaseKeeper, Protocol):
    """One queue, one session: enqueue, the worker's claim/finish cycle, and operations."""

    @property
    def autocommit(self) -> bool:
        """Whether each operation is its own transaction (not the caller's): only then may
        two threads' operations overlap on this store."""
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

    # The worker's cycle

    def claim(
        self,
        *,
        queues: Sequence[str] = ...,
        limit: int = ...,
        lease_seconds: int = ...,
        now: datetime | None = None,
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
    ) -> tuple[set[UUID], ClaimedBatch]: ...

    def reclaim(self, *, limit: int = ..., now: datetime | None = None) -> list[Job]: ...

    def complete(self, job: Job, result: Any = None, *, now: datetime | None = None) -> None: ...

    def fail(
        self, job: Job, error: str, *, permanent: bool = False, now: datetime | None = None
    ) -> None: ...

    # Waking idle workers

    def listen_for_jobs(self) -> bool: ...

    def unlisten_jobs(self) -> None: ...

    def wait_for_jobs(self, timeout: float) -> bool: ...

    # Reading and operating

    def get(self, job_id: UUID | str) -> Job: ...

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


class _FinishesAndClaims(Protocol):
    def finish_and_claim_unparsed(
        self,
        outcomes: Sequence[Outcome],
        *,
        queues: Sequence[str] = ...,
        limit: int = ...,
        lease_seconds: int = ...,
        now: datetime | None = None,
    ) -> tuple[set[UUID], ClaimedBatch]: ...


class DerivedOperations:
    """The port's operations that every store builds the same way from its one statement
    finish_and_claim_unparsed; both adapters inherit them, so they cannot drift apart."""

    def claim(
        self: _FinishesAndClaims,
        *,
        queues: Sequence[str] = (DEFAULT_QUEUE,),
        limit: int = 10,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        now: datetime | None = None,
    ) -> list[Job]:
        claimed = self.finish_and_claim_unparsed(
            (), queues=queues, limit=limit, lease_seconds=lease_seconds, now=now
        )[1]
        return claimed.jobs()

    def finish(
        self: _FinishesAndClaims, outcomes: Sequence[Outcome], *, now: datetime | None = None
    ) -> set[UUID]:
        """Persist a batch of outcomes in one statement; returns the ids whose lease held."""
        if not outcomes:
            return set()
        return self.finish_and_claim_unparsed(outcomes, limit=0, now=now)[0]

    def finish_and_claim(
        self: _FinishesAndClaims,
        outcomes: Sequence[Outcome],
        *,
        queues: Sequence[str] = (DEFAULT_QUEUE,),
        limit: int = 10,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        now: datetime | None = None,
    ) -> tuple[set[UUID], list[Job]]:
        """Persist outcomes and lease up to `limit` more jobs, best first, in one statement.

        Returns the ids whose lease held (the others' outcomes were refused) and the jobs
        claimed."""
        held, claimed = self.finish_and_claim_unparsed(
            outcomes, queues=queues, limit=limit, lease_seconds=lease_seconds, now=now
        )
        return held, claimed.jobs()

    def complete(
        self: _FinishesAndClaims, job: Job, result: Any = None, *, now: datetime | None = None
    ) -> None:
        _finish_one(self, transitions.succeeded(job, result), now)

    def fail(
        self: _FinishesAndClaims,
        job: Job,
        error: str,
        *,
        permanent: bool = False,
        now: datetime | None = None,
    ) -> None:
        _finish_one(self, transitions.failed(job, error, permanent=permanent), now)


def _finish_one(store: _FinishesAndClaims, outcome: Outcome, now: datetime | None) -> None:
    if outcome.job_id not in store.finish_and_claim_unparsed([outcome], limit=0, now=now)[0]:
        raise LeaseLost(outcome.job_id)
