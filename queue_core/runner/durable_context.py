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

from queue_core import telemetry
from queue_core.errors import (
    InvalidJob,
    JobCancelled,
    LeaseLost,
    PermanentError,
    QueueFull,
    RetryAfter,
)
from queue_core.model import steps, transitions, validation
from queue_core.model.jobs import TERMINAL, Job, JobSpec, Outcome, Status
from queue_core.model.steps import ChildFailed, Durable, InvalidStep, Retry, WaitKind, WaitTimeout
from queue_core.store.port import StepOperations, Store

# How often one undo is tried before its job is left dead with the undo's error.
UNDO_TRIES = steps.UNDO_TRIES
# The most children one map step may start.
MAX_CHILDREN = 10_000

# A job leased ahead by the runner waits up to a quick batch before its handler starts: the
# lease it sees at the start is taken to be this much shorter than claimed.
LEASED_AHEAD_SECONDS = 1.0

# The job whose step is running in this thread or task: a step inside it is refused. A
# context variable, so steps an async handler gathers side by side are not taken as nested.
_IN_STEP: ContextVar[JobSteps | None] = ContextVar("tickq_in_step", default=None)


class Compensating(BaseException):
    """Unwinds a handler replayed to compensate its job: it reached a step that never
    completed, so every step with an undo it will ever pass has been passed. A
    BaseException, as Suspended, so `except Exception` does not swallow it."""


class Suspended(BaseException):
    """Unwinds a handler whose job was just suspended (already stored by then).

    A BaseException, like asyncio.CancelledError, so a handler's `except Exception` does
    not swallow it and run on without its lease."""

    def __init__(self, job_id: Any, run_after: datetime, *, spawned: bool = False) -> None:
        self.job_id = job_id
        self.run_after = run_after
        self.spawned = spawned  # its children were enqueued with it (map, call)
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
    # Validates a child job's request with its task's defaults (the runner's registry).
    spec: Callable[..., JobSpec] | None = None
    # The version of the code running the handlers (catalog.code_version), recorded with
    # each run and each step it stores.
    code_version: str | None = None


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
        # Completed steps with an undo, in the order this run passed them: (name, undo, result).
        self.undos: list[tuple[str, Callable[..., Any], Any]] = []
        # The status and error a compensating job ends with (begun by an earlier run or this one).
        self.compensating: tuple[Status, str] | None = None

    # Public operations (through JobContext)

    def step(
        self,
        name: Any,
        fn: Callable[[], Any],
        *,
        retry: Retry | None = None,
        undo: Callable[..., Any] | None = None,
    ) -> Any:
        _step_options(fn, retry, undo)
        name, state = self._enter(name)
        if name in state.steps:
            return self._replayed(self._passed(name, state.steps[name], undo))
        self._make_room()
        try:
            result = self._inside(name, fn)
        except Exception as exc:
            self._failed_try(name, retry, exc)
            raise
        return self._passed(name, self._store(name, result, undo=undo is not None), undo)

    async def step_async(
        self,
        name: Any,
        fn: Callable[[], Any],
        *,
        retry: Retry | None = None,
        undo: Callable[..., Any] | None = None,
    ) -> Any:
        """`step` for async handlers: `fn` may return an awaitable, which is awaited."""
        _step_options(fn, retry, undo)
        name, state = self._enter(name)
        if name in state.steps:
            return self._replayed(self._passed(name, state.steps[name], undo))
        self._make_room()
        try:
            result = await self._inside_async(name, fn)
        except Exception as exc:
            self._failed_try(name, retry, exc)
            raise
        return self._passed(name, self._store(name, result, undo=undo is not None), undo)

    def map(self, name: Any, type: Any, payloads: Any, max_concurrency: Any = None) -> list[Any]:
        """One child job per payload, enqueued with the parent's suspension in one commit;
        on the run after they have all ended, their results in order (stored as this step)."""
        name, state = self._enter(name)
        if name in state.steps:
            return list(self._replayed(state.steps[name]))
        specs = self._child_specs(type, payloads)
        if max_concurrency is not None and (
            type_(max_concurrency) is not int or max_concurrency < 1
        ):
            raise InvalidStep(f"max_concurrency must be a positive int, got {max_concurrency!r}")
        children = self._db().children(self.job.id, name)
        if children:  # resumed: enqueued by an earlier run, never again
            if any(status not in TERMINAL for _, status, _, _ in children):
                # Woken before they all ended (an operator's nudge): wait on for them; the
                # last one's finish wakes the job.
                self._suspend(WaitKind.CHILDREN, name, until=steps.FOREVER)
            for index, (child, status, _, error) in enumerate(children):
                if status is not Status.SUCCEEDED:
                    raise ChildFailed(name, index, child, status.value, error)
            return list(self._store(name, [r for _, _, r, _ in children], counted=False))
        if not specs:
            return list(self._store(name, [], counted=False))
        try:
            run_after = self._db().enqueue_children(
                self.job.id,
                self.token,
                step=name,
                specs=specs,
                max_running=min(max_concurrency or len(specs), len(specs)),
                queue=self.job.queue,
                owner=self.job.user_id,
            )
        except QueueFull as exc:  # backpressure: wait for room, not an attempt spent
            raise RetryAfter(self.job.backoff.delay(self.job.attempts), str(exc)) from None
        self.host.counts.add("suspended")
        raise Suspended(self.job.id, run_after, spawned=True)

    def call(self, name: Any, type: Any, payload: Any = None) -> Any:
        """One child job, awaited: `map` of one, its result."""
        return self.map(name, type, [{} if payload is None else payload])[0]

    def compensate(self, outcome: Outcome) -> Outcome:
        """Run the undos of the completed steps in reverse order when the job ends dead or
        cancelled, each at most once (recorded like a step, fenced by the lease), before it
        settles; a failing undo suspends the job to be tried again with its backoff, and
        after UNDO_TRIES leaves it dead with the undo's error. Other outcomes pass."""
        if self.compensating is None:
            if outcome.status not in (Status.DEAD, Status.CANCELLED) or not self.undos:
                return outcome
            ends: Status = outcome.status
            error = outcome.error or ends.value
            self._db().compensation_begin(
                self.job.id,
                self.token,
                ends=ends,
                error=error,
                spare=len(self.undos) * UNDO_TRIES + 1,
            )
            self.compensating = (ends, error)
        ends, error = self.compensating
        state = self._load()
        for name, undo, result in reversed(self.undos):
            if state.undone(name):
                continue
            tries = self._db().undo_started(self.job.id, self.token, name)
            failure = self._undo(undo, result)
            if failure is None:
                self._db().undo_done(self.job.id, self.token, name)
                continue
            error = f"undo of step {name!r} failed ({tries} tries): {failure}"
            delay = None if tries >= UNDO_TRIES else self.job.backoff.delay(tries)
            try:
                self._db().step_failed(
                    self.job.id,
                    self.token,
                    kind="undo",
                    name=name,
                    error=failure,
                    delay=delay,
                    add=0,
                )
            except JobCancelled:  # asked to cancel: the undo cannot wait off the worker
                time.sleep(delay or 0)
                return self.compensate(outcome)
            if delay is None:
                return transitions.failed(self.job, error, permanent=True)
            self.host.counts.add("suspended")
            return steps.suspended(self.job)
        if ends is Status.CANCELLED:
            return Outcome(self.job.id, self.token, Status.CANCELLED, error=error)
        return transitions.failed(self.job, error, permanent=True)

    def sleep(self, name: Any, seconds: Any) -> None:
        seconds = _seconds(seconds, "sleep seconds")
        name, state = self._enter(name)
        if name in state.steps:
            self._replayed(None)
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
            return steps.waited(name, self._replayed(state.steps[name]))
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

    def patched(self, name: Any) -> bool:
        """Whether this run takes the new branch of a change to the handler: True once the
        run has passed this point under code with the call (its marker stored, before this
        returns), or reaches it with no stored step still ahead of it; False on a replay
        whose history went on past this point without the marker (begun under older code)."""
        name = steps.step_name(name, "patch name")
        if _IN_STEP.get() is self:
            raise InvalidStep(f"job.patched({name!r}) inside a step")
        state = self._load()
        if steps.patch_marked(state, name):
            return True
        if not steps.replaying(state, self.names):
            self._db().patch_marked(self.job.id, self.token, name)
            state.tries[f"patch:{name}"] = {"tries": 0, "error": None, "done": False}
            return True
        return False

    def deprecate_patch(self, name: Any) -> None:
        """The old branch of `patched(name)` is gone: new runs record the marker as
        `patched` does; `tickq deploy check` names stored histories that lack it."""
        self.patched(name)

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
        state = self._load()
        if self.compensating is not None and name not in state.steps:
            raise Compensating()
        return name, state

    def _load(self) -> Durable:
        if self.state is None:
            before = time.monotonic()  # the database's clock reads after this instant
            state, at = self._db().load(
                self.job.id, self.token, code_version=self.host.code_version
            )
            self.state, self.clock = state, (at, before)
            self.step_bytes = state.step_bytes
            self.compensating = state.compensation()
            if state.resumes:
                self.host.counts.add("resumed")
        return self.state

    def _inside(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run a step's fn, marked as inside this job's step (steps do not nest), in a span
        of its own when OpenTelemetry is on."""
        inside = _IN_STEP.set(self)
        try:
            with telemetry.span(f"step {name}", **{"tickq.step": name}):
                return fn()
        finally:
            _IN_STEP.reset(inside)

    async def _inside_async(self, name: str, fn: Callable[[], Any]) -> Any:
        inside = _IN_STEP.set(self)
        try:
            with telemetry.span(f"step {name}", **{"tickq.step": name}):
                result = fn()
                if inspect.isawaitable(result):
                    result = await result
                return result
        finally:
            _IN_STEP.reset(inside)

    def _replayed(self, value: Any) -> Any:
        """A stored step returned again: a handler replayed to compensate is stopped once it
        has passed every stored step (each undo it will ever pass is known), lest what it
        does after them (what killed its worker, perhaps) run again before the undos."""
        if self.compensating is not None:
            assert self.state is not None
            if self.names.issuperset(self.state.steps):
                raise Compensating()
        return value

    def _passed(self, name: str, result: Any, undo: Callable[..., Any] | None) -> Any:
        if undo is not None:
            self.undos.append((name, undo, result))
        return result

    def _failed_try(self, name: str, retry: Retry | None, exc: Exception) -> None:
        """A step's fn raised: with a retry policy and tries left, count the try and suspend
        until the next (the job's attempt given back); else return, and the error goes on to
        the job. Errors no try can fix (permanent ones, a lost lease, a cancel) go on too."""
        if retry is None or isinstance(exc, PermanentError | JobCancelled | LeaseLost):
            return
        state = self._load()
        tries = state.tried("step", name) + 1
        error = transitions.storable_error(f"{type_(exc).__name__}: {exc}")
        delay = retry.delay(tries)
        run_after = self._db().step_failed(
            self.job.id, self.token, kind="step", name=name, error=error, delay=delay
        )
        state.tries[f"step:{name}"] = {"tries": tries, "error": error, "done": False}
        if run_after is not None:
            self.host.counts.add("suspended")
            raise Suspended(self.job.id, run_after)

    def _child_specs(self, type: Any, payloads: Any) -> list[JobSpec]:
        if isinstance(payloads, str | bytes | dict) or not hasattr(payloads, "__iter__"):
            raise InvalidStep("map takes a list of payloads")
        payloads = list(payloads)
        if len(payloads) > MAX_CHILDREN:
            raise InvalidStep(f"a map step starts at most {MAX_CHILDREN} children")
        spec = self.host.spec or validation.job_spec
        try:
            return [spec(type, payload) for payload in payloads]
        except InvalidJob as exc:
            raise InvalidStep(f"a child job: {exc}") from None

    @staticmethod
    def _undo(undo: Callable[..., Any], result: Any) -> str | None:
        """Run one undo with its step's result; its error, or None when it ran to the end."""
        try:
            takes = bool(inspect.signature(undo).parameters)
        except (TypeError, ValueError):
            takes = True
        try:
            undo(result) if takes else undo()
        except Exception as exc:
            return transitions.storable_error(f"{type_(exc).__name__}: {exc}")
        return None

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

    def _store(self, name: str, result: Any, *, counted: bool = True, undo: bool = False) -> Any:
        state = self._load()
        encoded = steps.step_result(state.steps, self.step_bytes, name, result)
        version = self.host.code_version
        if undo:  # marked: a job ended away from its handler compensates (reclaim, cancel)
            self._db().complete(
                self.job.id, self.token, name, encoded, compensable=True, code_version=version
            )
        else:
            self._db().complete(self.job.id, self.token, name, encoded, code_version=version)
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
            self.job.id,
            self.token,
            kind=kind,
            name=name,
            until=until,
            delay=delay,
            code_version=self.host.code_version,
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
        raise InvalidStep(f"a step runs a function; got {type_(fn).__name__}")


def _step_options(fn: Any, retry: Any, undo: Any) -> None:
    _callable(fn)
    if retry is not None and not isinstance(retry, Retry):
        raise InvalidStep(f"retry must be a Retry, got {type_(retry).__name__}")
    if undo is not None and not callable(undo):
        raise InvalidStep(f"undo must be a function, got {type_(undo).__name__}")


type_ = type  # `map` and `call` take an argument named type
