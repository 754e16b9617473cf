"""The durable-step side of a handler's `job`: step, sleep, wait_for, suspend, time_left.

A job's stored steps load once, on its handler's first step (plain jobs never pay for it).
Every step write is one statement fenced by the lease token and committed before `step`
returns; a suspension is one fenced statement too, after which the handler is unwound with
`Suspended` and the runner counts the job as suspended (nothing left to persist).
"""

from __future__ import annotations

import inspect
import json
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NoReturn

from . import steps, telemetry, validation
from .errors import InvalidJob
from .jobs import Job
from .ports import StepOperations, Store
from .steps import Durable, InvalidStep, WaitKind, WaitTimeout

# A job leased ahead by the runner waits up to a quick batch before its handler starts: the
# lease it sees at the start is taken to be this much shorter than claimed.
LEASED_AHEAD_SECONDS = 1.0

# The job whose step is running in this thread or task: a step inside it is refused. A
# context variable, so steps an async handler gathers side by side are not taken as nested.
_IN_STEP: ContextVar[JobSteps | None] = ContextVar("tickq_in_step", default=None)


class Suspended(BaseException):
    """Unwinds a handler whose job was just suspended (already stored by then).

    A BaseException, like asyncio.CancelledError, so a handler's `except Exception` does
    not swallow it and run on without its lease."""

    def __init__(self, job_id: Any, run_after: datetime) -> None:
        self.job_id = job_id
        self.run_after = run_after
        super().__init__(f"job {job_id} suspended until {run_after.isoformat()}")


@dataclass(slots=True)
class StepCounts:
    """What the handlers of one runner did with steps, folded into each TickReport."""

    steps: int = 0
    suspended: int = 0
    resumed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, name: str, n: int = 1) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + n)

    def take(self) -> tuple[int, int, int]:
        with self.lock:
            taken = (self.steps, self.suspended, self.resumed)
            self.steps = self.suspended = self.resumed = 0
        return taken


@dataclass(frozen=True, slots=True)
class StepHost:
    """What a runner lends every job's steps: its store, the invocation's deadline (seconds
    left, or None without one) and its counters."""

    store: Callable[[], Store]  # the runner's store, which a reconnect may replace
    deadline: Callable[[], float] | None
    counts: StepCounts


class JobSteps:
    """One running job's steps; created on first use, lives as long as the handler call."""

    def __init__(
        self,
        job: Job,
        host: StepHost,
        *,
        lease_seconds: int,
        step_seconds: float | None,
        extend_lease: Callable[[float], None],
    ) -> None:
        assert job.lease_token is not None
        self.job = job
        self.token = job.lease_token
        self.host = host
        self.lease_seconds = lease_seconds
        self.step_seconds = step_seconds
        self._extend_lease = extend_lease
        leased = float(lease_seconds)
        if job.lease_until is not None and job.started_at is not None:
            leased = (job.lease_until - job.started_at).total_seconds()
        self.lease_ends = time.monotonic() + leased - LEASED_AHEAD_SECONDS
        self.state: Durable | None = None
        self.step_bytes = 0  # bytes of the stored step results, kept up to date
        self.clock: tuple[datetime, float] | None = None  # database now at load, monotonic
        self.names: set[str] = set()  # names used by this run of the handler
        self.ran = 0  # steps whose fn ran and was stored during this claim

    # Public operations (through JobContext)

    def step(self, name: Any, fn: Callable[[], Any]) -> Any:
        _callable(fn)
        name, state = self._enter(name)
        if name in state.steps:
            return state.steps[name]
        self._make_room()
        inside = _IN_STEP.set(self)
        try:
            with telemetry.span(f"step {name}", **{"tickq.step": name}):
                result = fn()
        finally:
            _IN_STEP.reset(inside)
        return self._store(name, result)

    async def step_async(self, name: Any, fn: Callable[[], Any]) -> Any:
        """`step` for async handlers: `fn` may return an awaitable, which is awaited."""
        _callable(fn)
        name, state = self._enter(name)
        if name in state.steps:
            return state.steps[name]
        self._make_room()
        inside = _IN_STEP.set(self)
        try:
            with telemetry.span(f"step {name}", **{"tickq.step": name}):
                result = fn()
                if inspect.isawaitable(result):
                    result = await result
        finally:
            _IN_STEP.reset(inside)
        return self._store(name, result)

    def sleep(self, name: Any, seconds: Any) -> None:
        seconds = _seconds(seconds, "sleep seconds")
        name, state = self._enter(name)
        if name in state.steps:
            return
        wait = state.wait
        if wait is not None and wait.kind is WaitKind.SLEEP and wait.name == name:
            if wait.until <= self.now():
                self._store(name, wait.until.isoformat(), counted=False)
                return
            self._suspend(WaitKind.SLEEP, name, until=wait.until)
        self._suspend(WaitKind.SLEEP, name, delay=seconds)

    def wait_for(self, name: Any, timeout: Any = None) -> Any:
        if timeout is not None:
            timeout = _seconds(timeout, "wait_for timeout")
        name, state = self._enter(name, "signal name")
        if name in state.steps:
            return steps.waited(name, state.steps[name])
        if name in state.signals:
            return self._store(name, state.signals[name], counted=False)
        wait = state.wait
        if wait is not None and wait.kind is WaitKind.SIGNAL and wait.name == name:
            if wait.until <= self.now():
                # Stored like a step, so a handler that goes on after the timeout gets the
                # same WaitTimeout on every later run instead of waiting again.
                self._store(name, steps.timed_out(wait.until), counted=False)
                raise WaitTimeout(name, wait.until)
            self._suspend(WaitKind.SIGNAL, name, until=wait.until)
        if timeout is None:
            self._suspend(WaitKind.SIGNAL, name, until=steps.FOREVER)
        self._suspend(WaitKind.SIGNAL, name, delay=timeout)

    def suspend(self, delay: Any = 0) -> None:
        delay = _seconds(delay, "suspend delay")
        if _IN_STEP.get() is self:
            raise InvalidStep("job.suspend() inside a step: a step must finish to be stored")
        self._suspend(WaitKind.SUSPEND, None, delay=delay)

    def time_left(self) -> float:
        """Seconds until the invocation ends; without a deadline, until the lease expires."""
        if self.host.deadline is not None:
            return self.host.deadline()
        return self.lease_ends - time.monotonic()

    def now(self) -> datetime:
        """The database clock, as read at load and advanced by this process's monotonic one."""
        self._load()
        assert self.clock is not None
        at, mono = self.clock
        return at + timedelta(seconds=time.monotonic() - mono)

    # Internals

    def _db(self) -> StepOperations:
        """The runner's store's steps (a store that keeps none refuses each operation)."""
        return self.host.store().steps

    def _enter(self, name: Any, what: str = "step name") -> tuple[str, Durable]:
        if _IN_STEP.get() is self:
            raise InvalidStep(f"steps do not nest: {name!r} was called inside another step")
        name = steps.step_name(name, what)
        if name in self.names:
            raise InvalidStep(f"{name!r} is used twice in this job: step names are unique")
        self.names.add(name)
        return name, self._load()

    def _load(self) -> Durable:
        if self.state is None:
            before = time.monotonic()  # the database's clock reads after this instant
            state, at = self._db().load(self.job.id, self.token)
            self.state, self.clock = state, (at, before)
            self.step_bytes = state.step_bytes
            if state.resumes:
                self.host.counts.add("resumed")
        return self.state

    def _make_room(self) -> None:
        """Before a step that has not completed: suspend when it would not fit in the time
        left (but never before this claim has stored one step, so every claim progresses),
        and extend the lease when the step would outlast it."""
        if self.step_seconds is None:
            return
        if self.ran and self.time_left() < self.step_seconds:
            self._suspend(WaitKind.SUSPEND, None, delay=0)
        if self.lease_ends - time.monotonic() < self.step_seconds:
            seconds = max(self.lease_seconds, 2 * self.step_seconds)
            started = time.monotonic()
            self._extend_lease(seconds)
            self.lease_ends = started + seconds

    def _store(self, name: str, result: Any, *, counted: bool = True) -> Any:
        state = self._load()
        encoded = steps.step_result(state.steps, self.step_bytes, name, result)
        self._db().complete(self.job.id, self.token, name, encoded)
        value = json.loads(encoded)
        # Added in place: copying the mapping per step would make a long job quadratic.
        state.steps[name] = value
        self.step_bytes += len(encoded.encode())
        if counted:
            self.ran += 1
        self.host.counts.add("steps")
        return value

    def _suspend(
        self,
        kind: WaitKind,
        name: str | None,
        *,
        until: datetime | None = None,
        delay: float = 0.0,
    ) -> NoReturn:
        run_after = self._db().suspend(
            self.job.id, self.token, kind=kind, name=name, until=until, delay=delay
        )
        self.host.counts.add("suspended")
        raise Suspended(self.job.id, run_after)


def _seconds(value: Any, field: str) -> float:
    try:
        return validation.number(value, field, 0, validation.MAX_DELAY_SECONDS)
    except InvalidJob as exc:
        raise InvalidStep(str(exc)) from None


def _callable(fn: Any) -> None:
    if not callable(fn):
        raise InvalidStep(f"a step runs a function; got {type(fn).__name__}")
