"""What a tick or a worker did: counters, dead letters, and the log line of each outcome."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from queue_core.model.jobs import Job, Outcome, Status

log = logging.getLogger("tickq")


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A job that went dead during a tick, for alerts (EventBridge, logs). Its counts are the
    ones the job views and the `Job Dead` event show: a saga's compensation's runs apart
    from its own attempts, and the max_attempts it declared, not the one compensation raised."""

    id: UUID
    type: str
    queue: str
    attempts: int
    error: str | None
    max_attempts: int | None = None
    compensation_runs: int = 0

    @classmethod
    def of(cls, job: Job, error: str | None) -> DeadLetter:
        return cls(job.id, job.type, job.queue, error=error, **job.shown_counts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "type": self.type,
            "queue": self.queue,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "compensation_runs": self.compensation_runs,
            "error": self.error,
        }


# What a TickReport counts: summed across ticks and published as metrics.
TICK_COUNTERS = (
    "claimed",
    "succeeded",
    "retried",
    "dead",
    "snoozed",
    "cancelled",
    "lost_leases",
    "reclaimed",
    "batches",
    "steps",
    "suspended",
    "resumed",
    "timed_out",
)


@dataclass(slots=True)
class TickReport:
    claimed: int = 0
    succeeded: int = 0
    retried: int = 0
    dead: int = 0
    snoozed: int = 0
    cancelled: int = 0
    lost_leases: int = 0
    reclaimed: int = 0
    batches: int = 0
    steps: int = 0  # durable steps stored
    suspended: int = 0  # jobs that left their worker (suspend, sleep, wait_for)
    resumed: int = 0  # suspended jobs whose steps loaded again
    timed_out: int = 0  # attempts stopped at their timeout (queue_core/runner/timeouts.py)
    # A gauge: handler threads that outlived their timeout and still run, at the last batch.
    abandoned_handlers: int = 0
    # Claiming stopped because abandoned_handlers passed the runner's bound (max_abandoned):
    # a worker that says so exits to be started afresh.
    abandoned_past_bound: bool = False
    duration_seconds: float = 0.0
    dead_letters: list[DeadLetter] = field(default_factory=list)

    def add(self, other: TickReport) -> None:
        for name in TICK_COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.duration_seconds += other.duration_seconds
        self.abandoned_handlers = other.abandoned_handlers
        self.abandoned_past_bound = self.abandoned_past_bound or other.abandoned_past_bound
        self.dead_letters.extend(other.dead_letters)

    def as_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__ if name != "dead_letters"}
        out["dead_letters"] = [d.as_dict() for d in self.dead_letters]
        return out

    def record(self, jobs: Sequence[Job], outcomes: Sequence[Outcome], held: set[UUID]) -> None:
        """Count a persisted batch: `held` are the ids whose lease held, so whose outcome
        was stored; the others lost their lease and their outcome was discarded."""
        all_held = len(held) == len(outcomes)  # held ids are a subset of the outcomes' ids
        for job, outcome in zip(jobs, outcomes, strict=True):
            if outcome.suspended:  # stored when it happened, counted in `suspended`
                continue
            if outcome.in_transaction:  # committed by the handler's transaction
                self.succeeded += 1
                continue
            if outcome.abandoned:  # its lease runs out; the reclaim ends the attempt
                self.lost_leases += 1
                continue
            if not all_held and outcome.job_id not in held:
                self.lost_leases += 1
                log.warning("lease lost; outcome discarded", extra=log_fields(job, outcome))
                continue
            name = _COUNTER[outcome.status]
            setattr(self, name, getattr(self, name) + 1)
            if outcome.status == Status.DEAD:
                self.dead_letters.append(DeadLetter.of(job, outcome.error))


_COUNTER = {
    Status.SUCCEEDED: "succeeded",
    Status.RETRYING: "retried",
    Status.DEAD: "dead",
    Status.QUEUED: "snoozed",
    Status.CANCELLED: "cancelled",
}


def log_fields(job: Job, outcome: Outcome) -> dict[str, Any]:
    """The `extra` of a log line about one attempt's outcome."""
    return {
        "job_id": str(job.id),
        "job_type": job.type,
        "attempt": job.attempts,
        "status": outcome.status.value,
        "error": outcome.error,
    }
