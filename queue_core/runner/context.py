"""What a handler receives: its job's data, and a fenced line back to the store."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from queue_core.errors import ConfigurationError, HandlerTimedOut, JobCancelled
from queue_core.model.jobs import DEFAULT_LEASE_SECONDS, Job, Outcome, Status
from queue_core.model.steps import Retry
from queue_core.runner.durable_context import JobSteps, StepHost
from queue_core.store.port import LeaseKeeper


class JobContext:
    """Passed to handlers as `job`. Progress and heartbeats raise JobCancelled when someone
    asked the job to cancel, and LeaseLost when another worker has taken it over. Its
    `max_attempts` is the declared one even while a saga compensates (the runs of that are
    `compensation_runs`), so a handler's last-attempt test is about its own attempts."""

    __slots__ = (
        "_host",
        "_job",
        "_keeper",
        "_lease_seconds",
        "_parent_results",
        "_step_seconds",
        "_steps",
        "_timed_out",
    )

    def __init__(
        self,
        job: Job,
        keeper: LeaseKeeper,
        lease_seconds: int,
        host: StepHost | None = None,
        step_seconds: float | None = None,
    ) -> None:
        self._job = job
        self._keeper = keeper
        self._lease_seconds = job.lease_seconds or lease_seconds or DEFAULT_LEASE_SECONDS
        self._host = host
        self._step_seconds = step_seconds
        self._steps: JobSteps | None = None
        self._parent_results: dict[UUID, Any] | None = None
        self._timed_out: float | None = None  # the timeout the runner stopped waiting at

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
        """This run's attempt as its claim counted it: a saga's compensation's runs count
        on from the job's own (compensation_runs says how many of them there are)."""
        return self._job.attempts

    @property
    def max_attempts(self) -> int:
        """The max_attempts declared, not the one a saga's compensation raised to leave its
        undos attempts, so `attempt >= max_attempts` still tells the job's own last attempt
        (the engine's retry-or-dead rule reads the row's raised figure, `row`)."""
        return self._job.shown_max_attempts

    @property
    def compensation_runs(self) -> int:
        """The runs of a saga's compensation, this one included (0 unless it compensates):
        the job's own attempts are `attempt - compensation_runs`."""
        return self._job.compensation_runs

    @property
    def snoozes(self) -> int:
        """Times the job was snoozed (RetryAfter): runs that `attempt` does not count."""
        return self._job.snoozes

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

    def timed_out(self, seconds: float) -> None:
        """The runner stopped waiting for the handler: every write from now on is refused,
        as the attempt's failure is (or is about to be) stored."""
        self._timed_out = seconds

    def _live(self) -> None:
        if self._timed_out is not None:
            raise HandlerTimedOut(self._job.id, self._timed_out)

    def progress(self, value: Any) -> None:
        self._live()
        assert self._job.lease_token is not None
        if self._keeper.report_progress(self._job.id, self._job.lease_token, value):
            raise JobCancelled(self._job.id)

    def extend_lease(self, seconds: float | None = None) -> None:
        self._live()
        assert self._job.lease_token is not None
        state = self._keeper.extend_lease(
            self._job.id, self._job.lease_token, seconds or self._lease_seconds
        )
        if state.cancel_requested:
            raise JobCancelled(self._job.id)

    heartbeat = extend_lease

    def hold_flow(self, key: str, seconds: float) -> datetime:
        """Keep every job of flow key `key` from starting for `seconds` (at most a day): say
        the downstream answered 429 with Retry-After. This job goes on as its handler decides
        (return, or raise RetryAfter). Returns when the hold ends."""
        self._live()
        assert self._job.lease_token is not None
        return self._keeper.hold_flow(self._job.id, self._job.lease_token, key, seconds)

    # Durable steps (docs/steps.md)

    def step(
        self,
        name: str,
        fn: Callable[[], Any],
        *,
        retry: Retry | None = None,
        undo: Callable[..., Any] | None = None,
    ) -> Any:
        """Run `fn()` once per job: its JSON result is stored (fenced by the lease) before
        this returns, and every later run of the handler gets the stored result instead.

        `retry`: the step's own retries, the job suspended between tries, its attempts not
        spent. `undo(result)`: run once, in reverse step order, if the job ends dead or
        cancelled after this step completed."""
        return self._durable().step(name, fn, retry=retry, undo=undo)

    def map(
        self, name: str, type: str, payloads: Iterable[Any], max_concurrency: int | None = None
    ) -> list[Any]:
        """Enqueue one child job of `type` per payload (at most `max_concurrency` runnable at
        once), leave the worker until all have ended, and return their results in order;
        ChildFailed names a child that ended dead or cancelled."""
        return self._durable().map(name, type, payloads, max_concurrency)

    def call(self, name: str, type: str, payload: Any = None) -> Any:
        """One child job, awaited as `map` awaits many: its result."""
        return self._durable().call(name, type, payload)

    def sleep(self, name: str, seconds: float) -> None:
        """Leave the worker for `seconds`; on the run after the wake time, returns at once."""
        self._durable().sleep(name, seconds)

    def wait_for(self, name: str, timeout: float | None = None) -> Any:
        """The payload of the signal `name`, leaving the worker until it comes; WaitTimeout
        when `timeout` seconds pass first."""
        return self._durable().wait_for(name, timeout)

    def suspend(self, delay: float = 0) -> None:
        """Leave the worker now and run again after `delay` seconds, steps kept, the attempt
        given back."""
        self._durable().suspend(delay)

    def patched(self, name: str) -> bool:
        """Whether this run takes a change's new branch: True on a run reaching this point
        first under code with the call (recorded), False on the replay of a history that
        passed it under older code (docs/steps.md, "Deploying durable code")."""
        return self._durable().patched(name)

    def deprecate_patch(self, name: str) -> None:
        """Mark where `patched(name)` was once the old branch was deleted (see patched)."""
        self._durable().deprecate_patch(name)

    def time_left(self) -> float:
        """Seconds until this invocation ends, or without one until the lease expires."""
        return self._durable().time_left()

    @property
    def steps_used(self) -> JobSteps | None:
        """The job's steps when its handler used any during this run (else None)."""
        return self._steps

    def _durable(self) -> JobSteps:
        self._live()
        if self._steps is None:
            if self._host is None:
                raise ConfigurationError(
                    "durable steps need a job run by a Runner on its own (a batch handler's "
                    "jobs have none)"
                )
            self._steps = JobSteps(
                self._job,
                self._host,
                lease_seconds=self._lease_seconds,
                step_seconds=self._step_seconds,
                extend_lease=self.extend_lease,
            )
        return self._steps

    def __repr__(self) -> str:
        return f"<job {self.type} {self.id} attempt {self.attempt}/{self.max_attempts}>"


class TransactionalJobContext(JobContext):
    """The `job` of a transactional handler: remembers a completion the handler made itself
    (queue_core.complete_in), so the runner does not complete the job a second time, and
    carries its task's events, which that completion writes with the success."""

    __slots__ = ("_completed", "_events")

    def __init__(
        self,
        job: Job,
        keeper: LeaseKeeper,
        lease_seconds: int,
        host: StepHost | None = None,
        step_seconds: float | None = None,
        events: frozenset[Status] = frozenset(),
    ) -> None:
        super().__init__(job, keeper, lease_seconds, host, step_seconds)
        self._events = events

    @property
    def events(self) -> frozenset[Status]:
        """The statuses whose events the job's task opted into."""
        return self._events

    @property
    def completed(self) -> Outcome | None:
        return getattr(self, "_completed", None)  # unset until the handler completes it

    def note_completed(self, outcome: Outcome) -> None:
        self._completed = outcome


class AsyncJobContext(JobContext):
    """The `job` of async handlers: the same API, with the step operations awaitable."""

    __slots__ = ()

    async def step(
        self,
        name: str,
        fn: Callable[[], Any],
        *,
        retry: Retry | None = None,
        undo: Callable[..., Any] | None = None,
    ) -> Any:
        """`fn` may be a coroutine function; its result is awaited before being stored."""
        return await self._durable().step_async(name, fn, retry=retry, undo=undo)

    async def map(  # type: ignore[override]
        self, name: str, type: str, payloads: Iterable[Any], max_concurrency: int | None = None
    ) -> list[Any]:
        return self._durable().map(name, type, payloads, max_concurrency)

    async def call(self, name: str, type: str, payload: Any = None) -> Any:
        return self._durable().call(name, type, payload)

    async def sleep(self, name: str, seconds: float) -> None:  # type: ignore[override]
        self._durable().sleep(name, seconds)

    async def wait_for(self, name: str, timeout: float | None = None) -> Any:
        return self._durable().wait_for(name, timeout)

    async def suspend(self, delay: float = 0) -> None:  # type: ignore[override]
        self._durable().suspend(delay)
