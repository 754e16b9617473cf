"""Cron schedules: one job per due occurrence, never two, whatever the scheduler does.

Expressions are parsed and iterated by `cronsim` rather than `croniter`: cronsim follows
Debian cron's daylight-saving rules (a fixed-time job in the skipped hour runs once right
after the jump, in the repeated hour only once; wildcard-hour jobs run in both copies of
it), iterates backwards as well as forwards, and is small, typed and maintained. Zones are
IANA names through `zoneinfo` (`tzdata` where the system has no zone database).

Deduplication does not rest on idempotency keys alone, since a key frees up once its job
is dead, cancelled or pruned: a scheduler run locks the schedule row (SKIP LOCKED), enqueues
the occurrence and moves `next_at` past it in one transaction, so any later or overlapping
run finds nothing due. The job also carries the key `cron:<name>:<occurrence, UTC>`.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import psycopg
from cronsim import CronSim, CronSimError

from queue_core.errors import InvalidJob, TickqError
from queue_core.model import flow, payloads, validation
from queue_core.model.jobs import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, JobSpec
from queue_core.postgres import Executor, PostgresStore

__all__ = [
    "MISSED_GRACE_SECONDS",
    "Firing",
    "Missed",
    "Schedule",
    "ScheduleExists",
    "ScheduleNotFound",
    "SchedulerReport",
    "Schedules",
    "latest_occurrence",
    "next_occurrence",
    "occurrence_key",
    "plan",
]

# With missed="skip", an occurrence fires only if the scheduler reaches it within this many
# seconds: the every-minute EventBridge rule plus a cold start stay well inside it.
MISSED_GRACE_SECONDS = 120.0
MAX_CRON = 256


class Missed(enum.StrEnum):
    """What a schedule does with occurrences that passed while no scheduler ran."""

    LATEST = "latest"  # fire the most recent missed occurrence once, drop the older ones
    SKIP = "skip"  # fire nothing later than the grace period; wait for the next occurrence


class ScheduleNotFound(TickqError):
    """No such schedule."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"schedule {name!r} not found")


class ScheduleExists(TickqError):
    """A schedule of this name exists already."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"schedule {name!r} exists already (replace it to change it)")


@dataclass(frozen=True, slots=True)
class Schedule:
    """One row of tickq.schedules."""

    name: str
    cron: str
    timezone: str
    type: str
    payload: dict[str, Any]
    queue: str
    priority: int
    max_attempts: int
    missed: Missed
    enabled: bool
    last_fired: datetime | None
    next_at: datetime
    created_at: datetime | None = None
    updated_at: datetime | None = None
    group: str | None = None  # fairness group of the jobs it enqueues; None: shared
    # The flow keys of every job it fires, besides its task's templates (queue_core/model/flow.py).
    flow_keys: tuple[str, ...] = ()

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            out[name] = value.isoformat() if isinstance(value, datetime) else value
        out["missed"] = self.missed.value
        out["flow_keys"] = list(self.flow_keys)
        return out


@dataclass(frozen=True, slots=True)
class Firing:
    """What one scheduler run does with one due schedule."""

    fire: datetime | None  # the occurrence to enqueue, or None when it was skipped
    next_at: datetime  # the first occurrence after now
    passed_over: bool  # older occurrences were dropped (downtime)


@dataclass(slots=True)
class SchedulerReport:
    due: int = 0
    fired: int = 0
    skipped: int = 0
    passed_over: int = 0
    failed: int = 0
    busy: int = 0  # due schedules another scheduler run was handling
    jobs: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


# Pure occurrence arithmetic: every function takes the instant it reasons about.


def zone(name: Any) -> ZoneInfo:
    if not isinstance(name, str) or not name or len(name) > 64:
        raise InvalidJob("timezone", f"must be an IANA time zone name, got {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidJob(
            "timezone", f"{name!r} is not an IANA time zone (e.g. UTC, Asia/Tokyo)"
        ) from None


def cron(expression: Any, timezone: str = "UTC") -> str:
    """Validate a 5-field cron expression (minute hour day month weekday)."""
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidJob("cron", f"must be a cron expression like '0 8 * * *', got {expression!r}")
    text = " ".join(expression.split())
    if len(text) > MAX_CRON or len(text.split()) != 5:
        raise InvalidJob(
            "cron", f"needs 5 fields (minute hour day month weekday), got {expression!r}"
        )
    try:
        next_occurrence(text, zone(timezone), datetime.now(UTC))
    except CronSimError as exc:
        raise InvalidJob("cron", f"{expression!r}: {exc}") from None
    except StopIteration:
        raise InvalidJob("cron", f"{expression!r} never occurs") from None
    return text


def next_occurrence(expression: str, tz: ZoneInfo, after: datetime) -> datetime:
    """The first occurrence strictly after `after`, in UTC."""
    found: datetime = next(CronSim(expression, after.astimezone(tz)))
    return found.astimezone(UTC)


def latest_occurrence(expression: str, tz: ZoneInfo, at: datetime) -> datetime | None:
    """The last occurrence at or before `at`, in UTC (None if there is none in 50 years)."""
    # Reverse iteration starts strictly before its (whole-second) start: one second later
    # makes an occurrence exactly at `at` count.
    start = at.replace(microsecond=0) + timedelta(seconds=1)
    try:
        found: datetime = next(CronSim(expression, start.astimezone(tz), reverse=True))
    except StopIteration:
        return None
    return found.astimezone(UTC)


def occurrences(expression: str, tz: ZoneInfo, after: datetime) -> Iterator[datetime]:
    """Occurrences strictly after `after`, in UTC, for as long as the caller reads."""
    for found in CronSim(expression, after.astimezone(tz)):
        yield found.astimezone(UTC)


def plan(schedule: Schedule, now: datetime, grace: float = MISSED_GRACE_SECONDS) -> Firing:
    """Decide what a scheduler run at `now` does with a schedule whose next_at <= now."""
    tz = schedule.zone
    latest = latest_occurrence(schedule.cron, tz, now)
    next_at = next_occurrence(schedule.cron, tz, now)
    if latest is None or latest < schedule.next_at:
        return Firing(None, next_at, passed_over=False)
    passed_over = latest > schedule.next_at
    late = (now - latest).total_seconds()
    if schedule.missed == Missed.SKIP and late > grace:
        return Firing(None, next_at, passed_over=True)
    return Firing(latest, next_at, passed_over)


def occurrence_key(name: str, occurrence: datetime) -> str:
    return f"cron:{name}:{occurrence.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"


# The schedules table


def _schedule(row: dict[str, Any]) -> Schedule:
    values = dict(row)
    values["missed"] = Missed(values["missed"])
    values["payload"] = payloads.decode(values["payload"])
    values["flow_keys"] = tuple(values.get("flow_keys") or ())
    return Schedule(**values)


class Schedules:
    """Schedules on one psycopg connection, and the scheduler that fires them."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.store = PostgresStore(conn)
        self._db = Executor(conn)

    def add(
        self,
        name: Any,
        cron_expression: Any,
        type: Any,
        payload: Mapping[str, Any] | None = None,
        *,
        timezone: Any = "UTC",
        queue: Any = None,
        priority: Any = None,
        max_attempts: Any = None,
        group: Any = None,
        flow_keys: Any = None,
        missed: Any = Missed.LATEST,
        enabled: bool = True,
        replace: bool = False,
        known_types: Collection[str] | None = None,
        now: datetime | None = None,
    ) -> Schedule:
        """Create a schedule (or replace one of that name); bad input writes nothing.

        It first fires at its next occurrence after `now`, never retroactively. Its
        `flow_keys` go on every job it fires, after the task's templates, checked as an
        enqueue checks them (with the templates filled from `payload`: at most 8 in all).
        """
        tz = zone(timezone)
        expression = cron(cron_expression, tz.key)
        # What the caller leaves out, the task catalogue says (as for an enqueue); its lease,
        # backoff and timeout are taken at each firing instead, so they follow deploys.
        published = (self.store.task_catalog().get(type) if isinstance(type, str) else None) or {}
        spec = validation.job_spec(
            type,
            payload,
            queue=published.get("queue") if queue is None else queue,
            priority=published.get("priority") if priority is None else priority,
            max_attempts=published.get("max_attempts") if max_attempts is None else max_attempts,
            group=group,
            flow_keys=flow_keys,
            known_types=known_types,
        )
        _task_flow_keys(spec, published)  # the templates fill, and fit beside the keys
        schedule_name = validation.name(name, "name")
        params: dict[str, Any] = {
            "name": schedule_name,
            "cron": expression,
            "timezone": tz.key,
            "type": spec.type,
            "payload": spec.payload_json,
            "queue": spec.queue,
            "priority": spec.priority,
            "max_attempts": spec.max_attempts,
            "group_key": None if group is None else spec.group_key,
            "flow_keys": list(spec.flow_keys),
            "missed": _missed(missed).value,
            "enabled": bool(enabled),
            "next_at": next_occurrence(expression, tz, now or self.store.now()),
            "replace": bool(replace),
            "now": now,
        }
        rows = self._db.dicts("schedules_add", params)
        if not rows:
            raise ScheduleExists(schedule_name)
        return _schedule(rows[0])

    def all(self) -> list[Schedule]:
        return [_schedule(row) for row in self._db.dicts("schedules_list", {})]

    def get(self, name: str) -> Schedule:
        rows = self._db.dicts("schedules_get", {"name": name})
        if not rows:
            raise ScheduleNotFound(name)
        return _schedule(rows[0])

    def enable(self, name: str, *, now: datetime | None = None) -> Schedule:
        """Switch on; occurrences that passed while it was off are not fired."""
        schedule = self.get(name)
        next_at = next_occurrence(schedule.cron, schedule.zone, now or self.store.now())
        return self._set_enabled(name, True, next_at, now)

    def disable(self, name: str, *, now: datetime | None = None) -> Schedule:
        return self._set_enabled(name, False, None, now)

    def remove(self, name: str) -> None:
        if not self._db.dicts("schedules_remove", {"name": name}):
            raise ScheduleNotFound(name)

    def run(self, *, now: datetime | None = None) -> SchedulerReport:
        """Enqueue every due occurrence once. Safe to run from many processes at once."""
        at = now or self.store.now()
        report = SchedulerReport()
        for name in [row["name"] for row in self._db.dicts("schedules_due", {"now": at})]:
            report.due += 1
            try:
                self._fire(name, at, now, report)
            except TickqError as exc:
                report.failed += 1
                report.errors[name] = str(exc)
        return report

    def _fire(self, name: str, at: datetime, now: datetime | None, report: SchedulerReport) -> None:
        # One transaction per schedule: the lock, the job and the new next_at commit together,
        # and a schedule that cannot enqueue (a full queue) does not hold back the others.
        with self.conn.transaction():
            rows = self._db.dicts("schedules_lock", {"name": name, "now": at})
            if not rows:
                report.busy += 1
                return
            schedule = _schedule(rows[0])
            firing = plan(schedule, at)
            report.passed_over += firing.passed_over
            if firing.fire is not None:
                spec = self._spec(schedule, firing.fire, self.store.task_catalog())
                result = self.store.enqueue(spec, now=now)
                if result.duplicate:  # a live job holds the occurrence's key: nothing to add
                    report.skipped += 1
                else:
                    report.fired += 1
                    report.jobs.append(str(result.id))
            else:
                report.skipped += 1
            params = {"name": name, "fired": firing.fire, "next_at": firing.next_at, "now": now}
            self._db.dicts("schedules_advance", params)

    @staticmethod
    def _spec(
        schedule: Schedule, occurrence: datetime, catalog: Mapping[str, Mapping[str, Any]]
    ) -> JobSpec:
        """The occurrence's job: the schedule's settings, and for what a schedule does not
        hold (lease, backoff, timeout) the task catalogue's as it is now."""
        published = catalog.get(schedule.type) or {}
        spec = validation.job_spec(
            schedule.type,
            schedule.payload,
            queue=schedule.queue or DEFAULT_QUEUE,
            idempotency_key=occurrence_key(schedule.name, occurrence),
            max_attempts=schedule.max_attempts or DEFAULT_MAX_ATTEMPTS,
            priority=schedule.priority,
            group=schedule.group,
            flow_keys=list(schedule.flow_keys),
            lease_seconds=published.get("lease_seconds"),
            timeout=published.get("timeout"),
            backoff_policy=published.get("backoff"),
        )
        return replace(spec, task_flow_keys=_task_flow_keys(spec, published))

    def _set_enabled(
        self, name: str, enabled: bool, next_at: datetime | None, now: datetime | None
    ) -> Schedule:
        params = {"name": name, "enabled": enabled, "next_at": next_at, "now": now}
        rows = self._db.dicts("schedules_set_enabled", params)
        if not rows:
            raise ScheduleNotFound(name)
        return _schedule(rows[0])


def _task_flow_keys(spec: JobSpec, published: Mapping[str, Any]) -> tuple[str, ...]:
    """The keys the task's templates (as the catalogue publishes them) give the spec's
    payload, refused as an enqueue refuses them: a field missing, or more than 8 keys with
    the spec's own."""
    templates = published.get("flow_key_templates") or ()
    if not templates:
        return ()
    filled = flow.fill(templates, json.loads(spec.payload_json))
    flow.combined(spec.flow_keys, filled)
    return filled


def _missed(value: Any) -> Missed:
    try:
        return Missed(value)
    except ValueError:
        choices = ", ".join(m.value for m in Missed)
        raise InvalidJob("missed", f"must be one of {choices}, got {value!r}") from None
