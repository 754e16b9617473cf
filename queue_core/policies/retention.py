"""Retention: pruning finished jobs by policy, in small batches.

A policy applies to a queue, a type, both, or everything, and lets go of jobs in its
statuses (succeeded and cancelled by default) that finished more than `max_age_seconds`
ago and/or are older than the newest `keep_last`. Each job follows the most specific
policy that matches it (queue and type, then type, then queue, then the catch-all); jobs no
policy matches are kept, and dead jobs are kept unless a policy lists `dead`.

Finished jobs are stored in one partition per UTC day (queue_core/policies/partitions.py). A day
whose every job the policies let go is dropped whole, in one short transaction, instead of
deleting its rows: see retention_partitions_droppable for when that is. Everything else
(the newest days, policies that keep the last N, jobs some policy keeps) is pruned row by
row: at most `batch_size` rows per statement, each statement its own short transaction on
an autocommit connection, so it never holds long locks. Deleting a job frees its
idempotency key: a succeeded job's key stays taken until the job is pruned.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from queue_core.errors import InvalidJob, TickqError
from queue_core.model import validation
from queue_core.model.jobs import Status
from queue_core.postgres.executor import Executor

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_STATUSES",
    "PolicyNotFound",
    "PruneReport",
    "Retention",
    "RetentionPolicy",
    "governing",
    "parse_age",
    "policy",
]

DEFAULT_BATCH_SIZE = 1000
MAX_BATCH_SIZE = 10_000
DEFAULT_STATUSES = (Status.SUCCEEDED.value, Status.CANCELLED.value)
PRUNABLE = (Status.SUCCEEDED.value, Status.CANCELLED.value, Status.DEAD.value)
MAX_AGE_SECONDS = 100 * 365 * 86_400.0
_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw]?)")
_AGE_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 604_800.0}


class PolicyNotFound(TickqError):
    """No retention policy has this scope."""

    def __init__(self, queue: str | None, type: str | None) -> None:
        self.queue = queue
        self.type = type
        super().__init__(f"no retention policy for {_scope(queue, type)}")


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    queue: str | None
    type: str | None
    statuses: tuple[str, ...] = DEFAULT_STATUSES
    max_age_seconds: float | None = None
    keep_last: int | None = None
    id: int | None = None

    @property
    def rank(self) -> int:
        """Specificity: a policy governs the jobs that no higher-ranked policy matches."""
        return (self.type is not None) * 2 + (self.queue is not None)

    @property
    def scope(self) -> str:
        return _scope(self.queue, self.type)

    def as_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "type": self.type,
            "statuses": list(self.statuses),
            "max_age_seconds": self.max_age_seconds,
            "keep_last": self.keep_last,
        }


@dataclass(slots=True)
class PruneReport:
    dry_run: bool = False
    deleted: int = 0  # with dry_run: how many would be deleted
    by_status: dict[str, int] = field(default_factory=dict)
    by_policy: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    partitions_dropped: list[str] = field(default_factory=list)  # whole days, oldest first
    complete: bool = True  # False when stopped by max_batches or should_continue

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def count(self, policy: RetentionPolicy, status: str, n: int) -> None:
        self.deleted += n
        self.by_status[status] = self.by_status.get(status, 0) + n
        self.by_policy[policy.scope] = self.by_policy.get(policy.scope, 0) + n


def parse_age(value: Any) -> float:
    """Seconds from '30d', '12h', '90m', '45s', '2w' or a plain number of seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return validation.number(value, "max_age", 0, MAX_AGE_SECONDS)
    match = _AGE.fullmatch(value.strip().lower()) if isinstance(value, str) else None
    if not match:
        raise InvalidJob("max_age", f"expected a duration such as 30d, 12h or 90m, got {value!r}")
    seconds = float(match.group(1)) * _AGE_UNITS[match.group(2)]
    return validation.number(seconds, "max_age", 0, MAX_AGE_SECONDS)


def policy(
    *,
    queue: Any = None,
    type: Any = None,
    statuses: Iterable[Any] | None = None,
    max_age: Any = None,
    keep_last: Any = None,
) -> RetentionPolicy:
    """Validate a policy: at least one of max_age and keep_last, statuses among finished ones."""
    if max_age is None and keep_last is None:
        raise InvalidJob("policy", "give max_age, keep_last or both")
    chosen = DEFAULT_STATUSES if statuses is None else tuple(dict.fromkeys(statuses))
    if not chosen or any(s not in PRUNABLE for s in chosen):
        raise InvalidJob("statuses", f"must be some of {', '.join(PRUNABLE)}, got {chosen!r}")
    return RetentionPolicy(
        queue=None if queue is None else validation.name(queue, "queue"),
        type=None if type is None else validation.name(type, "type"),
        statuses=tuple(str(s) for s in chosen),
        max_age_seconds=None if max_age is None else parse_age(max_age),
        keep_last=None
        if keep_last is None
        else validation.integer(keep_last, "keep_last", 0, validation.INT32),
    )


class Retention:
    """Retention policies on one psycopg connection, and the pruner that applies them."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._db = Executor(conn)

    def set(self, rule: RetentionPolicy) -> RetentionPolicy:
        return _policy(self._db.dicts("retention_policies_set", _params(rule, None))[0])

    def policies(self) -> list[RetentionPolicy]:
        return [_policy(row) for row in self._db.dicts("retention_policies_list", {})]

    def clear(self, *, queue: str | None = None, type: str | None = None) -> None:
        if not self._db.dicts("retention_policies_clear", {"queue": queue, "type": type}):
            raise PolicyNotFound(queue, type)

    def prune(
        self,
        *,
        dry_run: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_batches: int | None = None,
        should_continue: Callable[[], bool] = lambda: True,
        on_batch: Callable[[int], None] | None = None,
        now: datetime | None = None,
    ) -> PruneReport:
        """Delete what the policies let go, `batch_size` rows per short transaction, until
        done, `max_batches` ran or `should_continue()` says stop (a Lambda's time budget).

        With `dry_run`, count instead, in one read per policy, and change nothing.
        `on_batch(n)` hears of each batch's deletions (a progress bar).
        """
        validation.integer(batch_size, "batch_size", 1, MAX_BATCH_SIZE)
        report = PruneReport(dry_run=dry_run)
        rules = self.policies()
        if not dry_run and not self._drop_partitions(rules, report, should_continue, now):
            report.complete = False
            return report
        for rule in rules:
            params = _params(rule, now)
            if dry_run:
                for row in self._db.dicts("retention_count", params):
                    status, n = row["status"], row["count"]
                    report.count(rule, status, n)
                continue
            params["batch"] = batch_size
            while True:
                if not should_continue() or (
                    max_batches is not None and report.batches >= max_batches
                ):
                    report.complete = False
                    return report
                statuses = [row["status"] for row in self._db.dicts("retention_prune", params)]
                report.batches += 1
                if on_batch is not None:
                    on_batch(len(statuses))
                for status in set(statuses):
                    report.count(rule, status, statuses.count(status))
                if len(statuses) < batch_size:
                    break
        return report

    def _drop_partitions(
        self,
        rules: list[RetentionPolicy],
        report: PruneReport,
        should_continue: Callable[[], bool],
        now: datetime | None,
    ) -> bool:
        """Drop the day partitions whose every job the policies let go, counting their jobs
        under the policy that governs each; False when `should_continue()` said stop."""
        for row in self._db.dicts("retention_partitions_droppable", {"now": now}):
            if not should_continue():
                return False
            gone = self._db.dicts("retention_partition_drop", {"name": row["name"]})
            if not gone:  # kept: a parent in it is still needed by an unfinished child
                continue
            report.partitions_dropped.append(row["name"])
            for job in gone:
                if job["n"]:
                    rule = governing(rules, job["queue"], job["type"])
                    report.count(rule, job["status"], job["n"])
        return True


def governing(rules: Iterable[RetentionPolicy], queue: str, type: str) -> RetentionPolicy:
    """The most specific policy matching a job of this queue and type (a dropped partition
    is only ever one where the catch-all exists, so one always matches)."""
    matching = [
        r
        for r in rules
        if (r.queue is None or r.queue == queue) and (r.type is None or r.type == type)
    ]
    return max(matching, key=lambda r: r.rank)


def _params(rule: RetentionPolicy, now: datetime | None) -> dict[str, Any]:
    """A policy as statement parameters (each statement reads the ones it names)."""
    return {
        "queue": rule.queue,
        "type": rule.type,
        "statuses": list(rule.statuses),
        "max_age_seconds": rule.max_age_seconds,
        "keep_last": rule.keep_last,
        "rank": rule.rank,
        "now": now,
    }


def _policy(row: dict[str, Any]) -> RetentionPolicy:
    return RetentionPolicy(
        row["queue"],
        row["type"],
        tuple(row["statuses"]),
        row["max_age_seconds"],
        row["keep_last"],
        row["id"],
    )


def _scope(queue: str | None, type: str | None) -> str:
    parts = [f"queue={queue}" if queue else "", f"type={type}" if type else ""]
    return " ".join(p for p in parts if p) or "all jobs"
