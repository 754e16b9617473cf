"""Durable steps as values and pure transitions: a job's completed steps, the signals sent to
it, and suspension (leave the worker, come back later with the steps kept).

Every function takes `now` and reads no clock. The store does the same in SQL
(queue_core/postgres/steps.sql); the model-based test holds the two to each other.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from queue_core.errors import InvalidJob, InvalidTransition, LeaseLost, PermanentError
from queue_core.model import json_text, validation
from queue_core.model.backoff import Backoff
from queue_core.model.jobs import RUNNABLE, TERMINAL, Job, Outcome, Status

MAX_STEPS = 10_000
MAX_STEP_BYTES = 256 * 1024  # one step's result; larger data belongs in object storage
MAX_STEPS_BYTES = 32 * 1024 * 1024  # all of a job's step results together
MAX_SIGNAL_BYTES = 64 * 1024  # all of a job's signal payloads together
MAX_SIGNALS = 100  # signals one job holds: bounds its row and every view of it
# How often one undo is tried before its job is left dead with the undo's error (also in
# SQL: tickq.job_compensation_spare).
UNDO_TRIES = 5
# A wait without a timeout: the job is runnable again only when its signal comes.
FOREVER = datetime(9999, 1, 1, tzinfo=UTC)


class WaitKind(enum.StrEnum):
    SUSPEND = "suspend"  # job.suspend(delay), or the runner before a step that would not fit
    SLEEP = "sleep"  # job.sleep(name, seconds)
    SIGNAL = "signal"  # job.wait_for(name, timeout)
    CHILDREN = "children"  # job.map / job.call: until the step's children have all ended


@dataclass(frozen=True, slots=True)
class Wait:
    """What a suspended job waits for: a time, or a signal until a time."""

    kind: WaitKind
    name: str | None
    until: datetime

    def describe(self) -> str:
        until = "no timeout" if self.until >= FOREVER else f"until {self.until.isoformat()}"
        if self.kind is WaitKind.SLEEP:
            return f"sleep {self.name!r} {until}"
        if self.kind is WaitKind.SIGNAL:
            return f"signal {self.name!r} {until}"
        if self.kind is WaitKind.CHILDREN:
            return f"children of step {self.name!r}"
        return f"suspended {until}"


@dataclass(frozen=True, slots=True)
class Durable:
    """The durable side of one job: what `step` returns without running, and what wakes it."""

    steps: dict[str, Any] = field(default_factory=dict)  # name -> stored result
    step_bytes: int = 0
    signals: dict[str, Any] = field(default_factory=dict)  # name -> payload
    signal_bytes: int = 0
    resumes: int = 0
    wait: Wait | None = None
    # "<kind>:<name>" -> {"tries", "error", "done"}: retried steps ("step"), undos ("undo"),
    # and the compensation once begun ("compensation:<status it ends in>").
    tries: dict[str, Any] = field(default_factory=dict)
    # Names of the stored steps that have an undo (job_steps.compensable): a job ended away
    # from its handler (the reclaim, a cancel while it does not run) compensates when it has
    # one. A handler's load leaves it empty: the undos its replay passes tell it.
    undoable: frozenset[str] = frozenset()

    def compensation(self) -> tuple[Status, str] | None:
        """The status a compensating job ends in and the error that ended it, once begun."""
        for key, value in self.tries.items():
            kind, _, name = key.partition(":")
            if kind == "compensation":
                return Status(name), value.get("error") or ""
        return None

    def tried(self, kind: str, name: str) -> int:
        entry = self.tries.get(f"{kind}:{name}")
        return int(entry["tries"]) if entry else 0

    def undone(self, name: str) -> bool:
        entry = self.tries.get(f"undo:{name}")
        return bool(entry and entry.get("done"))


@dataclass(frozen=True, slots=True)
class DurableView:
    """What `tickq show`, GET /jobs/{id} and the job page show of a job's durable side."""

    resumes: int
    wait: Wait | None  # only while the job is suspended (queued, waiting)
    steps: list[dict[str, Any]]  # name, finished_at, size
    signals: list[dict[str, Any]]  # name, sent_at, size
    # How its handler ran it: the batch handler call it was last handed to, and whether its
    # success committed in the handler's own transaction.
    batch_id: UUID | None = None
    completed_in_transaction: bool = False
    tries: list[dict[str, Any]] = field(default_factory=list)  # kind, name, tries, error, ...
    children: list[dict[str, Any]] = field(default_factory=list)  # step, children, ended
    # The code version its last durable run ran under (each step carries its own).
    code_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        wait = None
        if self.wait is not None:
            wait = {
                "kind": self.wait.kind.value,
                "name": self.wait.name,
                "until": None if self.wait.until >= FOREVER else self.wait.until.isoformat(),
                "description": self.wait.describe(),
            }
        tries = {t["name"]: t for t in self.tries if t["kind"] == "step"}
        steps = [
            {**s, "tries": tries[s["name"]]["tries"] + 1} if s["name"] in tries else s
            for s in self.steps
        ]
        done = {s["name"] for s in self.steps}
        return {
            "resumes": self.resumes,
            "waiting_for": wait,
            "steps": steps,
            "signals": self.signals,
            "batch_id": None if self.batch_id is None else str(self.batch_id),
            "completed_in_transaction": self.completed_in_transaction,
            # Steps that failed and will be tried again (their own retry policy).
            "retrying_steps": [
                {"name": t["name"], "tries": t["tries"], "error": t["error"], "at": t["at"]}
                for t in tries.values()
                if t["name"] not in done
            ],
            "undone": [
                {
                    "name": t["name"],
                    "tries": t["tries"],
                    "error": t["error"],
                    "undone_at": t["done_at"],
                }
                for t in self.tries
                if t["kind"] == "undo"
            ],
            "compensation": next(
                (
                    {"ends": t["name"], "error": t["error"], "at": t["at"]}
                    for t in self.tries
                    if t["kind"] == "compensation"
                ),
                None,
            ),
            "maps": self.children,  # each map step: its children, how many ended
            "code_version": self.code_version,
            # Points job.patched(name) marked: the run passed them under code with the call.
            "patches": sorted(t["name"] for t in self.tries if t["kind"] == "patch"),
        }

    def handling(self) -> list[str]:
        """How its handler ran the job, in words (empty for a plain handler's job)."""
        notes = []
        if self.batch_id is not None:
            notes.append(f"part of batch {self.batch_id}")
        if self.completed_in_transaction:
            notes.append("completed in the handler's transaction")
        return notes


class InvalidStep(PermanentError):
    """A step, sleep, wait or signal was used in a way that can never succeed (an empty or
    repeated name, a result that is not JSON or too large, too many steps, a nested step).

    A PermanentError: retrying cannot fix the handler's code, so the job goes dead at once
    with this message, and nothing of the refused step is stored."""


@dataclass(frozen=True, slots=True)
class Retry:
    """A step's own retry policy: up to `max_attempts` tries of the step within one attempt
    of its job, `min(base * factor^(try-1), max)` seconds apart, the job suspended between
    them (no worker held, the job's attempt given back)."""

    max_attempts: int = 3
    base: float = 1.0
    max: float = 300.0
    factor: float = 2.0

    def __post_init__(self) -> None:
        if type(self.max_attempts) is not int or not 1 <= self.max_attempts <= 1000:
            raise ValueError(
                f"Retry max_attempts must be an int in [1, 1000], got {self.max_attempts!r}"
            )
        Backoff(self.base, self.factor, self.max)  # the same bounds as a job's backoff

    def delay(self, tries: int) -> float | None:
        """Seconds until the next try after `tries` failed ones in this round, or None when
        the step has used them all (the error then goes to the job)."""
        in_round = (tries - 1) % self.max_attempts + 1
        if in_round >= self.max_attempts:
            return None
        return Backoff(self.base, self.factor, self.max).delay(in_round)


class ChildFailed(PermanentError):
    """A child job of `job.map` / `job.call` ended dead or cancelled. A PermanentError: its
    parent's step would find the same child on every retry, so uncaught it ends the parent
    dead at once (retry the child, then the parent, to go on)."""

    def __init__(self, step: str, index: int, child_id: Any, status: str, error: str | None):
        self.step = step
        self.index = index
        self.child_id = child_id
        self.status = status
        self.error = error
        super().__init__(
            f"child {index} ({child_id}) of step {step!r} is {status}"
            + (f": {error}" if error else "")
        )


class WaitTimeout(Exception):
    """Raised in a handler by `job.wait_for(name, timeout)` when the timeout passed first."""

    def __init__(self, name: str, until: datetime) -> None:
        self.name = name
        self.until = until
        super().__init__(f"no signal {name!r} arrived before {until.isoformat()}")


def step_name(name: Any, field: str = "step name") -> str:
    if not isinstance(name, str) or not name:
        raise InvalidStep(f"{field} must be a non-empty string, got {name!r}")
    try:
        return validation.text(name, field, validation.MAX_NAME)
    except InvalidJob as exc:
        raise InvalidStep(str(exc)) from None


def step_result(done: Mapping[str, Any], used_bytes: int, name: str, result: Any) -> str:
    """The result as stored JSON, given the job's completed steps and their bytes; refuses
    what cannot be stored, before anything is written."""
    if name in done:
        raise InvalidStep(f"step {name!r} already completed in this job: step names are unique")
    if len(done) >= MAX_STEPS:
        raise InvalidStep(f"job already has {MAX_STEPS} steps, the most one job may store")
    try:
        encoded = json_text.json_value(result, f"result of step {name!r}", MAX_STEP_BYTES)
    except InvalidJob as exc:
        raise InvalidStep(str(exc)) from None
    size = len(encoded.encode())
    if used_bytes + size > MAX_STEPS_BYTES:
        raise InvalidStep(
            f"step {name!r} would bring the job's step results to "
            f"{used_bytes + size} bytes, over the limit of {MAX_STEPS_BYTES}"
        )
    return encoded


def complete_step(
    job: Job, state: Durable, *, token: Any, name: str, result: Any, undo: bool = False
) -> Durable:
    """Store one step's result (marked undoable when it has an undo); only the holder of
    the job's current lease may."""
    _check_lease(job, token)
    encoded = step_result(state.steps, state.step_bytes, name, result)
    return replace(
        state,
        steps={**state.steps, name: json.loads(encoded)},
        step_bytes=state.step_bytes + len(encoded.encode()),
        undoable=state.undoable | {name} if undo else state.undoable,
    )


def suspend(
    job: Job, state: Durable, *, token: Any, wait: Wait, now: datetime
) -> tuple[Job, Durable]:
    """Leave the worker: queued again at the wait's time (at once when the awaited signal is
    already there), the attempt given back, the steps kept. A job someone asked to cancel is
    refused (the runner then cancels it the ordinary way)."""
    _check_lease(job, token)
    if job.cancel_requested:
        raise InvalidTransition(job.id, "asked to cancel", "suspend")
    signalled = wait.kind is WaitKind.SIGNAL and wait.name in state.signals
    suspended = replace(
        job,
        status=Status.QUEUED,
        attempts=job.attempts - 1,
        run_after=now if signalled else wait.until,
        lease_until=None,
        lease_token=None,
        updated_at=now,
    )
    return suspended, replace(state, resumes=state.resumes + 1, wait=wait)


def deliver_signal(
    job: Job, state: Durable, *, name: str, payload: Any, now: datetime
) -> tuple[Job, Durable]:
    """Keep a signal for the job; a job suspended waiting for it becomes runnable now."""
    if job.status in TERMINAL:
        raise InvalidTransition(job.id, job.status, f"signal {name!r} to")
    if name in state.signals:
        raise InvalidJob("signal", f"{name!r} was already sent to job {job.id}")
    if len(state.signals) >= MAX_SIGNALS:
        raise InvalidJob("signal", f"a job holds at most {MAX_SIGNALS} signals")
    size = len(signal_payload(payload).encode())
    if state.signal_bytes + size > MAX_SIGNAL_BYTES:
        raise InvalidJob(
            "signal",
            f"the job's signals would hold {state.signal_bytes + size} bytes, "
            f"over the limit of {MAX_SIGNAL_BYTES}",
        )
    wait = state.wait
    wakes = (
        job.status in RUNNABLE
        and wait is not None
        and wait.kind is WaitKind.SIGNAL
        and wait.name == name
    )
    woken = replace(
        job, run_after=min(job.run_after, now) if wakes else job.run_after, updated_at=now
    )
    state = replace(
        state,
        signals={**state.signals, name: payload},
        signal_bytes=state.signal_bytes + size,
    )
    return woken, state


def suspended(job: Job, *, spawned: bool = False) -> Outcome:
    """The outcome of a handler unwound by a suspension: nothing left to persist.
    `spawned`: the suspension enqueued the job's children."""
    if job.lease_token is None:
        raise InvalidTransition(job.id, job.status, "suspend")
    return Outcome(job.id, job.lease_token, Status.QUEUED, suspended=True, spawned=spawned)


# How a wait that timed out is stored in its step: a key no payload is expected to use.
TIMED_OUT = "tickq:wait_timed_out_at"


def timed_out(until: datetime) -> dict[str, str]:
    return {TIMED_OUT: until.isoformat()}


def waited(name: str, stored: Any) -> Any:
    """What `wait_for` returns on a later run: the stored payload, or WaitTimeout again."""
    if isinstance(stored, dict) and len(stored) == 1 and TIMED_OUT in stored:
        raise WaitTimeout(name, datetime.fromisoformat(stored[TIMED_OUT]))
    return stored


def patch_marked(state: Durable, name: str) -> bool:
    """Whether a run of the job passed job.patched(name) under code that has the call."""
    return f"patch:{name}" in state.tries


def frontier(state: Durable) -> list[str]:
    """Where the job's last run stopped, when it stopped at a named point it had not
    stored: the sleep, signal or map step it waits for, or a step that failed and retries."""
    names = []
    if state.wait is not None and state.wait.kind is not WaitKind.SUSPEND and state.wait.name:
        names.append(state.wait.name)
    for key, entry in state.tries.items():
        kind, _, name = key.partition(":")
        if kind == "step" and not entry.get("done"):
            names.append(name)
    return [name for name in dict.fromkeys(names) if name not in state.steps]


def replaying(state: Durable, asked: set[str]) -> bool:
    """Whether a run that has asked for the names `asked` is still replaying its history:
    a stored step, or the point where its last run stopped, is yet to be asked for, so the
    code that stored the history went on past the current point (what job.patched answers
    False to, lacking its marker)."""
    return any(name not in asked for name in state.steps) or any(
        name not in asked for name in frontier(state)
    )


def signal_payload(payload: Any) -> str:
    return json_text.json_value(payload, "signal payload", MAX_SIGNAL_BYTES)


def cleared() -> Durable:
    """What a fresh retry leaves: no steps, no signals, no wait."""
    return Durable()


def wake_time(now: datetime, seconds: float) -> datetime:
    """`now + seconds`, or FOREVER for a wait too long to represent."""
    try:
        return min(now + timedelta(seconds=seconds), FOREVER)
    except OverflowError:
        return FOREVER


def _check_lease(job: Job, token: Any) -> None:
    if job.status != Status.RUNNING or job.lease_token != token:
        raise LeaseLost(job.id)
