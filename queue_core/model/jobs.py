"""Values of the queue: job rows, enqueue requests and handler outcomes."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from queue_core.model import payloads
from queue_core.model.backoff import Backoff
from queue_core.model.gates import Gate
from queue_core.model.timed_out import timed_out_view


class Status(enum.StrEnum):
    WAITING = "waiting"  # for parent jobs to finish (dependencies); never claimed
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"


RUNNABLE = frozenset({Status.QUEUED, Status.RETRYING})


def is_suspended(status: Status, wait_kind: str | None) -> bool:
    """A durable job that left its worker to wait (suspend, sleep, wait_for, a map's
    children) and has not been claimed back: every suspension stores it queued with its
    wait. A job whose resumed run failed (retrying) keeps the columns but waits for its
    backoff, not for them."""
    return status is Status.QUEUED and wait_kind is not None


TERMINAL = frozenset({Status.SUCCEEDED, Status.DEAD, Status.CANCELLED})
# Statuses whose idempotency key is still taken (they hold a row of tickq.job_keys).
KEY_HOLDING = frozenset(
    {Status.WAITING, Status.QUEUED, Status.RUNNING, Status.RETRYING, Status.SUCCEEDED}
)
# Statuses a job can be cancelled from at once (a running one is only asked to stop).
CANCELLABLE = frozenset({Status.WAITING, Status.QUEUED, Status.RETRYING})

DEFAULT_QUEUE = "default"
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_LEASE_SECONDS = 30
# A job with a timeout leases at least this much longer than the timeout, so the runner
# stops its handler and stores the failure before another worker may reclaim the job.
TIMEOUT_LEASE_MARGIN = 10
ERROR_HISTORY = 20


@dataclass(frozen=True, slots=True)
class Job:
    """One row of tickq.jobs. Field order matches the store's column list."""

    id: UUID
    queue: str
    type: str
    user_id: UUID | None
    status: Status
    payload: dict[str, Any]
    idempotency_key: str | None
    attempts: int
    max_attempts: int
    priority: int
    run_after: datetime
    lease_until: datetime | None
    lease_token: UUID | None
    progress: Any
    result: Any
    error: str | None
    errors: list[dict[str, Any]]
    lease_seconds: int | None
    backoff_base: float
    backoff_factor: float
    backoff_max: float
    backoff_jitter: float
    cancel_requested: bool
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    group_key: str = ""  # fairness group: given, else the owner, else shared ''
    # Some job was enqueued after this one (dependencies): its end settles them.
    has_children: bool = False
    # The priority an application user gave its job: it ranks that owner's jobs after
    # `priority` (0 for every job such a caller enqueues), see transitions.claim_order.
    owner_priority: int = 0
    # Times a handler snoozed it (RetryAfter): not attempts, which a snooze gives back.
    snoozes: int = 0
    # Seconds its handler may run before the runner stops it (None: no limit of its own).
    timeout_seconds: int | None = None
    # What a durable job's last suspension waits for (a signal, a sleep, its children, a
    # step's retry); it is suspended while queued with one (is_suspended).
    wait_kind: str | None = None
    # The keys its flow limits count it under (queue_core/model/flow.py); an outside caller's
    # stored as '<owner>/key'.
    flow_keys: list[str] = field(default_factory=list)
    # A saga's compensation raises max_attempts to leave its undos attempts (the engine counts
    # against that); these keep the max_attempts declared and the attempts counted when it
    # first began, for the views (None: it never compensated). See compensation_runs.
    declared_max_attempts: int | None = None
    compensation_attempts: int | None = None

    @property
    def compensation_runs(self) -> int:
        """The attempts spent compensating: counted since the compensation began."""
        if self.compensation_attempts is None:
            return 0
        return max(self.attempts - self.compensation_attempts, 0)

    @property
    def shown_attempts(self) -> int:
        """The attempts the views show: the job's own, its compensation's runs apart."""
        return self.attempts - self.compensation_runs

    @property
    def shown_max_attempts(self) -> int:
        """The max_attempts the views show: as declared, not as a compensation raised it."""
        declared = self.declared_max_attempts
        return self.max_attempts if declared is None else declared

    @property
    def shown_counts(self) -> dict[str, int]:
        """attempts, max_attempts and compensation_runs as every view, event and report
        shows them."""
        return {
            "attempts": self.shown_attempts,
            "max_attempts": self.shown_max_attempts,
            "compensation_runs": self.compensation_runs,
        }

    @property
    def attempts_label(self) -> str:
        """For tables: attempts against the max_attempts declared, a compensation's runs
        apart ("2/2, compensation runs 1")."""
        label = f"{self.shown_attempts}/{self.shown_max_attempts}"
        if self.compensation_runs:
            label += f", compensation runs {self.compensation_runs}"
        return label

    @property
    def backoff(self) -> Backoff:
        return Backoff(
            self.backoff_base, self.backoff_factor, self.backoff_max, self.backoff_jitter
        )

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def is_suspended(self) -> bool:
        """Left its worker to wait and not claimed back: not runnable before its wait ends."""
        return is_suspended(self.status, self.wait_kind)

    @property
    def state(self) -> str:
        """What the views show: the status, but `suspended` for a suspended job, which its
        row stores as queued (with its wait)."""
        return "suspended" if self.is_suspended else self.status.value

    @property
    def standing_error(self) -> str | None:
        """The failure that stands on the job, for lists: none once it succeeded, whose
        `error` is an earlier attempt's (kept, with the others, in `errors`)."""
        return None if self.status is Status.SUCCEEDED else self.error

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view for the CLI and the HTTP API."""
        out: dict[str, Any] = {}
        for name in _VIEW_COLUMNS:
            value = getattr(self, name)
            if isinstance(value, UUID):
                value = str(value)
            elif isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, Status):
                value = value.value
            out[name] = value
        # Counts that mean what they say: attempts against the max_attempts declared, the
        # runs a compensation added apart.
        out.update(self.shown_counts)
        out["state"] = self.state
        # A timed-out last attempt: after how long and how its handler was stopped.
        out["timed_out"] = timed_out_view(self.error)
        return out


JOB_COLUMNS: tuple[str, ...] = tuple(Job.__dataclass_fields__)
# What to_dict shows: the engine's own bookkeeping of a compensation is shown as its counts.
_VIEW_COLUMNS = tuple(
    c for c in JOB_COLUMNS if c not in ("declared_max_attempts", "compensation_attempts")
)
_STATUS_INDEX = JOB_COLUMNS.index("status")
_PAYLOAD_INDEX = JOB_COLUMNS.index("payload")
_make_job: Any = Job


_STATUS_BY_VALUE = {status.value: status for status in Status}


def job_from_row(values: Sequence[Any]) -> Job:
    """Build a Job from a row selected in JOB_COLUMNS order."""
    fields = list(values)
    # A dict lookup: calling the enum costs more than the rest of the row's mapping.
    fields[_STATUS_INDEX] = _STATUS_BY_VALUE[fields[_STATUS_INDEX]]
    fields[_PAYLOAD_INDEX] = payloads.decode(fields[_PAYLOAD_INDEX])
    job: Job = _make_job(*fields)
    return job


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A validated request to enqueue one job (see `validation.job_spec`)."""

    type: str
    payload_json: str
    queue: str = DEFAULT_QUEUE
    user_id: UUID | None = None
    idempotency_key: str | None = None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    priority: int = 0
    run_after: datetime | None = None
    delay: float = 0.0
    lease_seconds: int | None = None
    backoff: Backoff = field(default_factory=Backoff)
    group_key: str = ""  # resolved at validation: the group given, else user_id, else ''
    gate: Gate | None = None  # a debounce or throttle (queue_core/model/gates.py)
    timeout_seconds: int | None = None  # the handler's time limit; the lease covers it
    flow_keys: tuple[str, ...] = ()  # the caller's own (an outside caller's: owned)
    task_flow_keys: tuple[str, ...] = ()  # its task's templates filled from the payload

    @property
    def stored_flow_keys(self) -> tuple[str, ...]:
        """The keys a trusted enqueue stores: the task's, then the caller's, once each."""
        if not self.task_flow_keys:
            return self.flow_keys
        return tuple(dict.fromkeys([*self.task_flow_keys, *self.flow_keys]))


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    """The job a request landed on; `duplicate` when a live job already held its key (or a
    throttle's window its job), `debounced` when a debounce moved the key's waiting job."""

    id: UUID
    status: Status
    duplicate: bool
    job: Job | None = None  # the whole row, for callers that show it (single, without after)
    debounced: bool = False

    def to_dict(self) -> dict[str, Any]:
        """What the CLI and EnqueueFunction answer for each request."""
        return {
            "id": str(self.id),
            "status": self.status.value,
            "duplicate": self.duplicate,
            "debounced": self.debounced,
        }


class Verdict(enum.StrEnum):
    """What a handler run decided; the tick runner turns it into an Outcome."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PERMANENT = "permanent"
    SNOOZED = "snoozed"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class Outcome:
    """The write that ends one attempt, fenced by the attempt's lease token."""

    job_id: UUID
    lease_token: UUID
    status: Status
    result_json: str | None = None
    error: str | None = None
    delay: float = 0.0
    # A snooze: the attempt its claim counted is given back and counted as a snooze.
    extra_attempt: bool = False
    # The job suspended (steps.suspend): its own fenced statement stored that already, so
    # the batch's statement skips it.
    suspended: bool = False
    # The success committed in the handler's own transaction (transactional handlers):
    # stored by that commit, so the batch's statement skips it too.
    in_transaction: bool = False
    # The lifecycle event the job's task opted into (queue_core/policies/outbox.py), as the finish
    # statement takes it: JSON text, written into the outbox with this outcome.
    event_json: str | None = None
    # The batch handler call the attempt ran in (batch consume), stored with the outcome.
    batch_id: UUID | None = None
    # Nothing to store: a transactional handler's connection failed (refused until its
    # lease ended, or lost during its transaction, which may have committed), so the job
    # is left to the reclaim, as a lost worker's is.
    abandoned: bool = False
    # The suspension enqueued the job's children (a map): runnable jobs the claim that
    # came before this batch could not see.
    spawned: bool = False

    @property
    def is_plain_success(self) -> bool:
        """Succeeded with nothing else to store: the store sends these compactly."""
        return (
            self.status is Status.SUCCEEDED
            and self.result_json is None
            and not self.error
            and not self.in_transaction
            and self.event_json is None
            and self.batch_id is None
        )

    @property
    def stored(self) -> bool:
        """Stored already by a statement of its own (a suspension, a handler's commit), or
        left to the reclaim: the batch's statement skips it."""
        return self.suspended or self.in_transaction or self.abandoned
