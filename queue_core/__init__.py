"""tickq's engine: a job queue in one PostgreSQL table, run by stateless ticks.

Lives here: the values (jobs, specs, reports), the pure transitions, the store port and
its adapters (PostgreSQL with its SQL and migrations, and the in-memory model), the runner
and the standing policies (schedules, limits, retention).

May import: the standard library and its declared dependencies (psycopg, cronsim, tzdata).
Never `functions` (the Lambda shell) or `infra` (tooling), nor anything AWS or terminal UI.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import psycopg

from .backoff import Backoff
from .context import JobContext
from .errors import (
    ConfigurationError,
    DatabaseError,
    InvalidJob,
    InvalidTransition,
    JobCancelled,
    JobNotFound,
    LeaseLost,
    PermanentError,
    QueueFull,
    RetryAfter,
    TickqError,
    UnknownJobType,
)
from .jobs import EnqueueResult, Job, JobSpec, Status
from .registry import Registry, Task, registry, task
from .store import PostgresStore
from .tick import Runner, TickReport

# Libraries stay quiet unless the application configures logging.
logging.getLogger("tickq").addHandler(logging.NullHandler())

__all__ = [
    "Backoff",
    "ConfigurationError",
    "DatabaseError",
    "EnqueueResult",
    "InvalidJob",
    "InvalidTransition",
    "Job",
    "JobCancelled",
    "JobContext",
    "JobNotFound",
    "JobSpec",
    "LeaseLost",
    "PermanentError",
    "PostgresStore",
    "QueueFull",
    "Registry",
    "RetryAfter",
    "Runner",
    "Status",
    "Task",
    "TickReport",
    "TickqError",
    "UnknownJobType",
    "enqueue",
    "enqueue_many",
    "registry",
    "task",
]


def enqueue(
    conn: psycopg.Connection[Any],
    type: str,
    payload: Mapping[str, Any] | None = None,
    *,
    using: Registry | None = None,
    now: datetime | None = None,
    **options: Any,
) -> EnqueueResult:
    """Enqueue one job on the caller's connection; inside the caller's transaction it commits
    or rolls back with the caller's own writes."""
    spec = (using or registry).spec(type, payload, **options)
    return _store(conn).enqueue(spec, now=now)


def enqueue_many(
    conn: psycopg.Connection[Any],
    requests: Iterable[Mapping[str, Any]],
    *,
    using: Registry | None = None,
    now: datetime | None = None,
) -> list[EnqueueResult]:
    """Enqueue many jobs in one round trip; each request is a dict of enqueue's arguments."""
    batch = (using or registry).batch(requests)
    return _store(conn).enqueue_batch(batch, now=now)


# One store per connection, so the store's short-lived cache of "are any limits set?" spares
# every enqueue on the caller's connection an extra round trip.
_stores: weakref.WeakKeyDictionary[psycopg.Connection[Any], PostgresStore] = (
    weakref.WeakKeyDictionary()
)


def _store(conn: psycopg.Connection[Any]) -> PostgresStore:
    store = _stores.get(conn)
    if store is None:
        store = _stores[conn] = PostgresStore(conn)
    return store
