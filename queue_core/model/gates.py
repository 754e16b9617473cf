"""Debounce and throttle: enqueues of one key (per owner) that share a job.

* Debounce(key, seconds, max_seconds): while the key's job has not started, another enqueue
  replaces its payload (the latest wins) and moves its run_after to now + seconds, never
  later than its first enqueue + max_seconds; the enqueue returns that job, flagged
  `debounced`.
* Throttle(key, seconds): at most one job per key is created per window of `seconds` from
  the last one created; an enqueue inside the window returns that job, flagged duplicate.

The database applies both (tickq.job_gate, queue_core/schema/functions/job_gate.sql), under
a lock per key, so concurrent enqueues of one key neither lose an update nor make a second
job. The pure model below says what it must do, for the property tests to hold it to.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar, Literal

Kind = Literal["debounce", "throttle"]


@dataclass(frozen=True, slots=True)
class Debounce:
    """One job for a burst of enqueues: it runs `seconds` after the last one, but no later
    than `max_seconds` after the first (None: no bound)."""

    key: str
    seconds: float
    max_seconds: float | None = None

    kind: ClassVar[Kind] = "debounce"


@dataclass(frozen=True, slots=True)
class Throttle:
    """At most one job per window of `seconds`, counted from the last job created."""

    key: str
    seconds: float

    kind: ClassVar[Kind] = "throttle"
    max_seconds: ClassVar[None] = None


Gate = Debounce | Throttle


@dataclass(frozen=True, slots=True)
class GateView:
    """A job's gate as its views show it: which key made it and how many enqueues it took."""

    kind: Kind
    key: str | None  # None in the operator's view: a key is its user's own text
    enqueues: int
    first_at: datetime | None = None

    @property
    def summary(self) -> str:
        """'debounced 3 times' (or throttled): the enqueues beyond the one that made it."""
        verb = "debounced" if self.kind == "debounce" else "throttled"
        times = self.enqueues - 1
        key = "" if self.key is None else f" (key {self.key})"
        return f"{verb} {times} time{'' if times == 1 else 's'}{key}"

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "key": self.key,
            "enqueues": self.enqueues,
            "first_at": None if self.first_at is None else self.first_at.isoformat(),
            "summary": self.summary,
        }


@dataclass(frozen=True, slots=True)
class GatedJob:
    """A job of the model: when it may run and how many enqueues landed on it."""

    run_after: datetime
    enqueues: int


@dataclass(frozen=True, slots=True)
class Enqueue:
    """An enqueue of the gate's key at `at`."""

    at: datetime


@dataclass(frozen=True, slots=True)
class Claim:
    """A worker claims the key's job at `at` if it is runnable then (it starts)."""

    at: datetime


Event = Enqueue | Claim


def model(gate: Gate, events: Iterable[Event]) -> list[GatedJob]:
    """The jobs a sequence of enqueues and claims of one key makes, in order of creation.

    A throttled enqueue changes nothing but the count; a new job of a throttle runs at once.
    """
    jobs: list[GatedJob] = []
    first: datetime | None = None  # the open job's first enqueue (debounce: not started)
    for event in events:
        if isinstance(event, Claim):
            if gate.kind == "debounce" and first is not None and jobs[-1].run_after <= event.at:
                first = None  # it started: the next enqueue makes a new job
            continue
        now = event.at
        if first is not None and gate.kind == "debounce":
            jobs[-1] = GatedJob(debounced_run_after(gate, first, now), jobs[-1].enqueues + 1)
        elif first is not None and now < first + timedelta(seconds=gate.seconds):
            jobs[-1] = GatedJob(jobs[-1].run_after, jobs[-1].enqueues + 1)
        else:
            first = now
            delay = gate.seconds if gate.kind == "debounce" else 0.0
            jobs.append(GatedJob(now + timedelta(seconds=delay), 1))
    return jobs


def debounced_run_after(gate: Gate, first: datetime, now: datetime) -> datetime:
    """A debounced job's run time: now + seconds, never past first enqueue + max_seconds."""
    run_after = now + timedelta(seconds=gate.seconds)
    if gate.max_seconds is None:
        return run_after
    return min(run_after, first + timedelta(seconds=gate.max_seconds))
