"""What a handler receives: its job's data, and a fenced line back to the store."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from .errors import JobCancelled
from .jobs import DEFAULT_LEASE_SECONDS, Job
from .ports import LeaseKeeper


class JobContext:
    """Passed to handlers as `job`. Progress and heartbeats raise JobCancelled when someone
    asked the job to cancel, and LeaseLost when another worker has taken it over."""

    __slots__ = ("_job", "_keeper", "_lease_seconds", "_parent_results")

    def __init__(self, job: Job, keeper: LeaseKeeper, lease_seconds: int) -> None:
        self._job = job
        self._keeper = keeper
        self._lease_seconds = job.lease_seconds or lease_seconds or DEFAULT_LEASE_SECONDS
        self._parent_results: dict[UUID, Any] | None = None

    @property
    def id(self) -> UUID:
        return self._job.id

    @property
    def type(self) -> str:
        return self._job.type

    @property
    def queue(self) -> str:
        return self._job.queue

    @property
    def payload(self) -> dict[str, Any]:
        return self._job.payload

    @property
    def attempt(self) -> int:
        return self._job.attempts

    @property
    def max_attempts(self) -> int:
        return self._job.max_attempts

    @property
    def user_id(self) -> UUID | None:
        return self._job.user_id

    @property
    def idempotency_key(self) -> str | None:
        return self._job.idempotency_key

    @property
    def parent_results(self) -> dict[UUID, Any]:
        """The result of each job this one was enqueued after, by parent id (empty without
        parents). Read on first use, so jobs that never ask pay nothing; retention keeps the
        parents of unfinished jobs, so the results are there whenever it runs."""
        if self._parent_results is None:
            self._parent_results = self._keeper.parent_results(self._job.id)
        return self._parent_results

    @property
    def row(self) -> Job:
        return self._job

    def progress(self, value: Any) -> None:
        assert self._job.lease_token is not None
        if self._keeper.report_progress(self._job.id, self._job.lease_token, value):
            raise JobCancelled(self._job.id)

    def extend_lease(self, seconds: float | None = None) -> None:
        assert self._job.lease_token is not None
        state = self._keeper.extend_lease(
            self._job.id, self._job.lease_token, seconds or self._lease_seconds
        )
        if state.cancel_requested:
            raise JobCancelled(self._job.id)

    heartbeat = extend_lease

    def __repr__(self) -> str:
        return f"<job {self.type} {self.id} attempt {self.attempt}/{self.max_attempts}>"
