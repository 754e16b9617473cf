"""Flow keys: what a job touches (a customer, a downstream account, a model), and the limits
that bound each key's work across every worker.

A job carries up to MAX_KEYS keys. A limit is set per key prefix (`shop:`) and governs every
key that starts with it, the longest limited prefix winning; `max_running` bounds the jobs
of EACH such key running at once, `rate_limit` per `rate_period_seconds` each key's starts in
any sliding window. A hold keeps every job of one key from starting until a time. The claim
applies these rules in SQL (tickq.flow_admit); `admit` here is the same rule as a pure
function of the state, held to the SQL by tests/model/test_flow_matches_model.py.
"""

from __future__ import annotations

import re
import string
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

from queue_core.errors import InvalidJob

MAX_KEYS = 8
MAX_KEY = 200  # characters of a key as given
# As stored: an outside caller's key carries its owner's uuid and '/' (tickq.jobs'
# jobs_flow_keys_check allows this much, for every role).
MAX_STORED_KEY = 240
MAX_HOLD_SECONDS = 86_400
MAX_RUNNING = 100_000
ALPHABET = "letters, digits and _.:/@=+-"
KEY_RE = re.compile(r"[A-Za-z0-9_.:/@=+-]+")
_FIELD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

Id = TypeVar("Id")


def key(value: Any, field: str = "flow_keys", max_len: int = MAX_KEY) -> str:
    """One flow key (or prefix): 1-MAX_KEY characters of a plain alphabet, so a key can
    never carry a separator, a wildcard or text a view would have to escape."""
    if not isinstance(value, str):
        raise InvalidJob(field, f"a flow key must be a string, got {type(value).__name__}")
    if not 0 < len(value) <= max_len or not KEY_RE.fullmatch(value):
        raise InvalidJob(
            field, f"a flow key must be 1-{max_len} characters of {ALPHABET}, got {value[:60]!r}"
        )
    return value


def keys(value: Any, field: str = "flow_keys") -> tuple[str, ...]:
    """A job's flow keys as given: a list of at most MAX_KEYS keys; repeats count once."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidJob(field, f"must be a list of flow keys, got {type(value).__name__}")
    if len(value) > MAX_KEYS:
        raise InvalidJob(field, f"at most {MAX_KEYS} flow keys per job, got {len(value)}")
    return tuple(dict.fromkeys(key(k, field) for k in value))


def templates(value: Any, field: str = "flow_keys") -> tuple[str, ...]:
    """A task's key templates (`shop:{shop}`): keys whose `{field}` parts name top-level
    fields of the payload, checked when the task is declared."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidJob(field, f"must be a list of flow key templates, got {value!r}")
    if len(value) > MAX_KEYS:
        raise InvalidJob(field, f"at most {MAX_KEYS} flow keys per job, got {len(value)}")
    for template in value:
        if not isinstance(template, str):
            raise InvalidJob(field, f"a flow key template must be a string, got {template!r}")
        parts = list(string.Formatter().parse(template))
        literal = "".join(text for text, _, _, _ in parts) or "x"
        key(literal, field)
        for _, name, spec, conversion in parts:
            if name is not None and (not _FIELD_RE.fullmatch(name) or spec or conversion):
                raise InvalidJob(
                    field,
                    f"template {template!r}: each {{...}} names one top-level payload field",
                )
    return tuple(value)


def fill(templates_: Iterable[str], payload: Mapping[str, Any]) -> tuple[str, ...]:
    """The keys a task's templates give for one payload: each `{field}` replaced by that
    top-level field's value (a string or an integer); a field missing is refused."""
    filled = []
    for template in templates_:
        parts = []
        for text, name, _, _ in string.Formatter().parse(template):
            parts.append(text)
            if name is None:
                continue
            value = payload.get(name)
            if isinstance(value, bool) or not isinstance(value, str | int):
                raise InvalidJob(
                    "flow_keys",
                    f"template {template!r} needs the payload's top-level field {name!r} "
                    f"as a string or an integer, got {value!r}"[:200],
                )
            parts.append(str(value))
        filled.append(key("".join(parts), "flow_keys"))
    return tuple(filled)


def combined(given: Sequence[str], filled: Sequence[str]) -> tuple[str, ...]:
    """A job's keys: its task's filled templates, then those the caller gave, once each."""
    merged = tuple(dict.fromkeys([*filled, *given]))
    if len(merged) > MAX_KEYS:
        raise InvalidJob("flow_keys", f"at most {MAX_KEYS} flow keys per job, got {len(merged)}")
    return merged


def owned(keys_: Sequence[str], owner: UUID | str) -> tuple[str, ...]:
    """An outside caller's keys as stored: under its owner, so no tenant can hold back
    another's work by naming its key."""
    return tuple(f"{owner}/{k}" for k in keys_)


@dataclass(frozen=True, slots=True)
class FlowLimit:
    """The limits of the keys a prefix governs (each key on its own)."""

    prefix: str
    max_running: int | None = None
    rate_limit: int | None = None
    rate_period_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "prefix": self.prefix,
            "max_running": self.max_running,
            "rate_limit": self.rate_limit,
            "rate_period_seconds": self.rate_period_seconds,
        }


def flow_limit(
    prefix: Any,
    *,
    max_running: Any = None,
    rate: tuple[int, float] | None = None,
) -> FlowLimit:
    """Validate a prefix's limits: a cap per key, a rate per key (limits.parse_rate), or
    both."""
    name = key(prefix, "prefix", MAX_STORED_KEY)
    if max_running is None and rate is None:
        raise InvalidJob("limit", "give --max-running, --rate, or both")
    if max_running is not None and (
        isinstance(max_running, bool)
        or not isinstance(max_running, int)
        or not 1 <= max_running <= MAX_RUNNING
    ):
        raise InvalidJob("max_running", f"must be an integer 1-{MAX_RUNNING}, got {max_running!r}")
    count, period = rate if rate is not None else (None, None)
    return FlowLimit(name, max_running, count, period)


def hold_seconds(value: Any) -> float:
    """A hold's length: above 0, at most a day (a hold never outlives a forgotten key)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= MAX_HOLD_SECONDS
    ):
        raise InvalidJob("seconds", f"a hold lasts 0-{MAX_HOLD_SECONDS} seconds, got {value!r}")
    return float(value)


def governing(key_: str, limits: Collection[FlowLimit]) -> FlowLimit | None:
    """The limit of a key: its longest limited prefix's; None: the key is free."""
    best: FlowLimit | None = None
    for limit in limits:
        if key_.startswith(limit.prefix) and (best is None or len(limit.prefix) > len(best.prefix)):
            best = limit
    return best


def admit(
    candidates: Sequence[tuple[Id, Sequence[str]]],
    *,
    limits: Collection[FlowLimit],
    running: Mapping[str, int],
    starts: Mapping[str, Sequence[datetime]],
    holds: Mapping[str, datetime],
    now: datetime,
) -> list[Id]:
    """The candidates (best first) that may start at `now`, in order: a job starts when
    none of its keys is held past `now` and each governed key stays within its cap of
    running jobs (`running`, jobs running per key) and its rate (`starts`, the key's
    earlier starts; a start at `now - period` is out of the window)."""
    used = dict(running)
    started: dict[str, int] = {}
    admitted: list[Id] = []
    for job, job_keys in candidates:
        if any(holds.get(k, now) > now for k in job_keys):
            continue
        governed = [(k, lim) for k in job_keys if (lim := governing(k, limits)) is not None]
        if not all(_room(k, lim, used, started, starts, now) for k, lim in governed):
            continue
        admitted.append(job)
        for k, _ in governed:
            used[k] = used.get(k, 0) + 1
            started[k] = started.get(k, 0) + 1
    return admitted


def _room(
    key_: str,
    limit: FlowLimit,
    used: Mapping[str, int],
    started: Mapping[str, int],
    starts: Mapping[str, Sequence[datetime]],
    now: datetime,
) -> bool:
    if limit.max_running is not None and used.get(key_, 0) >= limit.max_running:
        return False
    if limit.rate_limit is None or limit.rate_period_seconds is None:
        return True
    since = now - timedelta(seconds=limit.rate_period_seconds)
    recent = sum(1 for at in starts.get(key_, ()) if at > since) + started.get(key_, 0)
    return recent < limit.rate_limit
