"""Checks on everything that enters the queue, so bad input fails before any write."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from queue_core.errors import InvalidJob, UnknownJobType
from queue_core.model import flow, payloads
from queue_core.model.backoff import DEFAULT_BACKOFF, Backoff
from queue_core.model.gates import Debounce, Gate, Throttle
from queue_core.model.jobs import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, TIMEOUT_LEASE_MARGIN, JobSpec
from queue_core.model.json_text import MAX_PAYLOAD_BYTES, utf8

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]*")
MAX_NAME = 128
MAX_KEY = 255
MAX_RESULT_BYTES = 1024 * 1024
INT32 = 2**31 - 1
MAX_ATTEMPTS_LIMIT = 1000
MAX_LEASE_SECONDS = 12 * 3600
MAX_TIMEOUT_SECONDS = MAX_LEASE_SECONDS
MAX_DELAY_SECONDS = 366 * 86_400


def name(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise InvalidJob(field, f"must be a string, got {type(value).__name__}")
    if not 0 < len(value) <= MAX_NAME or not NAME_RE.fullmatch(value):
        raise InvalidJob(
            field,
            f"must be 1-{MAX_NAME} characters of letters, digits and _.:/- "
            f"starting with a letter or digit, got {_preview(value)}",
        )
    return value


def integer(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJob(field, f"must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidJob(field, f"must be between {low} and {high}, got {_preview(value)}")
    return value


def number(value: Any, field: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidJob(field, f"must be a number, got {type(value).__name__}")
    if not (math.isfinite(value) and low <= value <= high):
        raise InvalidJob(field, f"must be between {low} and {high}, got {_preview(value)}")
    return float(value)


def uuid(value: Any, field: str) -> UUID:
    if isinstance(value, UUID):
        return value
    if isinstance(value, str):
        try:
            return UUID(value)
        except ValueError:
            pass
    raise InvalidJob(field, f"must be a UUID, got {_preview(value)}")


def text(value: Any, field: str, max_len: int) -> str:
    if not isinstance(value, str):
        raise InvalidJob(field, f"must be a string, got {type(value).__name__}")
    if not 0 < len(value) <= max_len:
        raise InvalidJob(field, f"must be 1-{max_len} characters long")
    if "\x00" in value:
        raise InvalidJob(field, "must not contain NUL characters")
    utf8(value, field)
    return value


# The times every row holds (a CHECK on each time column, queue_core/bounds.py): a day
# inside the years 1-9999 at each end, so that no session's time zone moves one out of
# the range a Python datetime can hold.
EARLIEST_TIME = datetime(1, 1, 2, tzinfo=UTC)
LATEST_TIME = datetime(9999, 12, 30, tzinfo=UTC)


def readable_time(value: Any, field: str) -> datetime:
    """An aware datetime the engine can store and read back."""
    when = aware_datetime(value, field)
    if not EARLIEST_TIME <= when <= LATEST_TIME:
        raise InvalidJob(
            field,
            f"must be one of the finite dates of the years 1-9999 a worker can read "
            f"({EARLIEST_TIME.isoformat()} to {LATEST_TIME.isoformat()}), got {when.isoformat()}",
        )
    return when


def aware_datetime(value: Any, field: str) -> datetime:
    if not isinstance(value, datetime):
        raise InvalidJob(field, f"must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidJob(field, "must be timezone-aware")
    return value


def backoff(value: Any, field: str = "backoff") -> Backoff:
    if isinstance(value, Backoff):
        return value
    if not isinstance(value, Mapping):
        raise InvalidJob(field, f"must be an object with base/factor/max/jitter, got {value!r}")
    unknown = set(value) - {"base", "factor", "max", "jitter"}
    if unknown:
        raise InvalidJob(field, f"unknown keys {sorted(unknown)}")
    numbers = {k: number(v, f"{field}.{k}", 0, 7 * 86_400) for k, v in value.items()}
    try:
        return Backoff(**numbers)
    except ValueError as exc:
        raise InvalidJob(field, str(exc)) from None


def job_spec(
    type: Any,
    payload: Any = None,
    *,
    queue: Any = None,
    user_id: Any = None,
    idempotency_key: Any = None,
    max_attempts: Any = None,
    priority: Any = None,
    run_after: Any = None,
    delay: Any = None,
    lease_seconds: Any = None,
    timeout: Any = None,
    backoff_policy: Any = None,
    group: Any = None,
    debounce: Any = None,
    throttle: Any = None,
    flow_keys: Any = None,
    known_types: Collection[str] | None = None,
    max_payload_bytes: int = MAX_PAYLOAD_BYTES,
) -> JobSpec:
    """Validate one enqueue request; None means "use the default"."""
    type_ = name(type, "type")
    if known_types is not None and type_ not in known_types:
        raise UnknownJobType(type_, sorted(known_types))
    payload_json = payloads.encode(payload, max_payload_bytes)
    if run_after is not None and delay is not None:
        raise InvalidJob("run_after", "give either run_after or delay, not both")
    owner = None if user_id is None else uuid(user_id, "user_id")
    gated = gate(
        debounce, throttle, idempotency_key=idempotency_key, run_after=run_after, delay=delay
    )
    lease = (
        None
        if lease_seconds is None
        else integer(lease_seconds, "lease_seconds", 1, MAX_LEASE_SECONDS)
    )
    limit = None if timeout is None else integer(timeout, "timeout", 1, MAX_TIMEOUT_SECONDS)
    if limit is not None:
        lease = timeout_lease(lease, limit)
    return JobSpec(
        type=type_,
        payload_json=payload_json,
        queue=DEFAULT_QUEUE if queue is None else name(queue, "queue"),
        user_id=owner,
        idempotency_key=(
            None if idempotency_key is None else text(idempotency_key, "idempotency_key", MAX_KEY)
        ),
        max_attempts=(
            DEFAULT_MAX_ATTEMPTS
            if max_attempts is None
            else integer(max_attempts, "max_attempts", 1, MAX_ATTEMPTS_LIMIT)
        ),
        priority=0 if priority is None else integer(priority, "priority", -INT32, INT32),
        run_after=None if run_after is None else readable_time(run_after, "run_after"),
        delay=0.0 if delay is None else number(delay, "delay", 0, MAX_DELAY_SECONDS),
        lease_seconds=lease,
        backoff=DEFAULT_BACKOFF if backoff_policy is None else backoff(backoff_policy),
        group_key=default_group(None if group is None else name(group, "group"), owner),
        gate=gated,
        timeout_seconds=limit,
        flow_keys=flow.keys(flow_keys),
    )


def timeout_lease(lease_seconds: int | None, timeout: int) -> int:
    """The lease of a job with a timeout: at least the timeout and a margin, so its lease
    outlasts the handler the runner stops (within the largest lease a row may hold)."""
    return min(MAX_LEASE_SECONDS, max(lease_seconds or 0, timeout + TIMEOUT_LEASE_MARGIN))


def gate(
    debounce: Any, throttle: Any, *, idempotency_key: Any, run_after: Any, delay: Any
) -> Gate | None:
    """A request's debounce or throttle, refused where it cannot mean anything: both at
    once, either with an idempotency key (each decides which job an enqueue lands on), and
    a debounce with its own run_after or delay (the debounce decides when its job runs)."""
    if debounce is None and throttle is None:
        return None
    if debounce is not None and throttle is not None:
        raise InvalidJob("throttle", "give either debounce or throttle, not both")
    field = "debounce" if debounce is not None else "throttle"
    if idempotency_key is not None:
        raise InvalidJob(
            field,
            f"cannot be combined with idempotency_key: each decides which job {field} "
            "requests land on",
        )
    if debounce is not None and (run_after is not None or delay is not None):
        raise InvalidJob(
            "debounce",
            "cannot be combined with run_after or delay: the debounce sets when its job runs",
        )
    if debounce is not None:
        return _gate_value(debounce, Debounce, "debounce")
    return _gate_value(throttle, Throttle, "throttle")


def no_gate_after(specs: Collection[JobSpec]) -> None:
    """Jobs after parents take no debounce or throttle: an enqueue that lands on an earlier
    job would leave the parents it names unheeded."""
    for spec in specs:
        if spec.gate is not None:
            raise InvalidJob(
                spec.gate.kind,
                "cannot be combined with after: a job that waits for parents "
                "is its own job, never an earlier one of the key",
            )


def _gate_value(value: Any, kind: type[Debounce] | type[Throttle], field: str) -> Gate:
    """A Debounce or Throttle, given as one or as an object {"key", "seconds"[, "max_seconds"]}."""
    if isinstance(value, Debounce | Throttle):
        if not isinstance(value, kind):
            raise InvalidJob(field, f"must be a {kind.__name__}, got {type(value).__name__}")
        fields = {"key": value.key, "seconds": value.seconds, "max_seconds": value.max_seconds}
    elif isinstance(value, Mapping):
        allowed = {"key", "seconds", "max_seconds"} if kind is Debounce else {"key", "seconds"}
        unknown = set(value) - allowed
        if unknown or not {"key", "seconds"} <= set(value):
            raise InvalidJob(
                field,
                f"must be an object with {', '.join(sorted(allowed))} "
                f"(key and seconds required), got keys {sorted(map(str, value))}",
            )
        fields = {"max_seconds": None, **value}
    else:
        raise InvalidJob(field, f"must be a {kind.__name__} or an object, got {_preview(value)}")
    key = text(fields["key"], f"{field}.key", MAX_KEY)
    seconds = number(fields["seconds"], f"{field}.seconds", 0, MAX_DELAY_SECONDS)
    if seconds <= 0:
        raise InvalidJob(f"{field}.seconds", "must be more than 0")
    if kind is Throttle:
        return Throttle(key, seconds)
    ceiling = fields["max_seconds"]
    if ceiling is None:
        return Debounce(key, seconds)
    ceiling = number(ceiling, "debounce.max_seconds", 0, MAX_DELAY_SECONDS)
    if ceiling < seconds:
        raise InvalidJob(
            "debounce.max_seconds", f"must be at least seconds ({seconds:g}), got {ceiling:g}"
        )
    return Debounce(key, seconds, ceiling)


def default_group(group: str | None, user_id: UUID | None) -> str:
    """A job's fairness group: the one given, else its owner's id, else the shared ''."""
    if group is not None:
        return group
    return "" if user_id is None else str(user_id)


def _preview(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."
