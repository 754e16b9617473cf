"""Partitions of finished jobs: one per UTC day, created ahead of time by maintenance.

tickq.jobs keeps live jobs in tickq.jobs_live and finished ones in tickq.jobs_done, which is
partitioned again by finish time, one partition per UTC day (queue_core/schema/tables.sql).
A finish whose day has no partition yet lands in the default partition and never fails;
`ensure` gives today and the next `days_ahead` days a partition, and any day found in the
default partition one too, moving its rows in. Retention drops whole days
(queue_core/policies/retention.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import psycopg

from queue_core.model import validation
from queue_core.postgres.executor import Executor

__all__ = ["DEFAULT_DAYS_AHEAD", "DayPartition", "ensure", "ensure_partitions", "partitions"]

# Maintenance runs every few minutes; three days ahead survive a long outage of it.
DEFAULT_DAYS_AHEAD = 3
MAX_DAYS_AHEAD = 366


@dataclass(frozen=True, slots=True)
class DayPartition:
    name: str
    day: date
    upper_bound: datetime
    estimated_rows: int


def ensure(
    conn: psycopg.Connection[Any],
    *,
    days_ahead: int = DEFAULT_DAYS_AHEAD,
    now: datetime | None = None,
) -> int:
    """Create the missing day partitions from today to `days_ahead` days ahead, and for each
    day with rows in the default partition; returns how many were created. Each step waits
    at most a moment for its locks (and retries), so it never holds up the queue."""
    validation.integer(days_ahead, "days_ahead", 0, MAX_DAYS_AHEAD)
    return _ensure_days(conn, now, days_ahead)


def ensure_partitions(
    conn: psycopg.Connection[Any],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    days_ahead: int = DEFAULT_DAYS_AHEAD,
    now: datetime | None = None,
) -> int:
    """`ensure`, plus a partition for each UTC day of finish times in [since, until), for
    bulk loads of finished jobs (an import, a benchmark) made before they are written."""
    created = 0
    if since is not None and until is not None and until > since:
        first = since.astimezone(UTC).date()
        last = (until - timedelta(microseconds=1)).astimezone(UTC).date()
        days = validation.integer((last - first).days, "until - since (days)", 0, MAX_DAYS_AHEAD)
        created += _ensure_days(conn, datetime.combine(first, time(), UTC), days)
    return created + ensure(conn, days_ahead=days_ahead, now=now)


def _ensure_days(conn: psycopg.Connection[Any], start: datetime | None, days: int) -> int:
    """Partitions for the day of `start` (today when None) and `days` days after it."""
    rows = Executor(conn).dicts("partitions_ensure", {"now": start, "days": days})
    created: int = rows[0]["jobs_partitions_ensure"]
    return created


def partitions(conn: psycopg.Connection[Any]) -> list[DayPartition]:
    """The day partitions, oldest first."""
    return [DayPartition(**row) for row in Executor(conn).dicts("partitions_list", {})]
