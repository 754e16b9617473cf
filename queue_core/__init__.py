"""tickq's engine: a job queue in one PostgreSQL table, run by stateless ticks.

Lives here: the values (jobs, specs, reports), the pure transitions, the store port and
its adapters (PostgreSQL with its SQL and migrations, and the in-memory model), the runner
and the standing policies (schedules, limits, retention).

May import: the standard library and its declared dependencies (psycopg, cronsim, tzdata).
Never `functions` (the Lambda shell) or `infra` (tooling), nor anything AWS or terminal UI.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from queue_core.errors import (
    ConfigurationError,
    DatabaseError,
    InvalidJob,
    InvalidParent,
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
from queue_core.model import dependencies
from queue_core.model.backoff import Backoff
from queue_core.model.gates import Debounce, Throttle
from queue_core.model.job_batch import JobBatch
from queue_core.model.jobs import EnqueueResult, Job, JobSpec, Status
from queue_core.model.steps import ChildFailed, InvalidStep, Retry, WaitTimeout
from queue_core.policies.outbox import publish
from queue_core.policies.partitions import ensure_partitions
from queue_core.postgres import PostgresStore, StepStore
from queue_core.postgres.transactional import complete_in
from queue_core.runner.batch_handler import HandlerBatch
from queue_core.runner.context import JobContext
from queue_core.runner.registry import Registry, Task, registry, task
from queue_core.runner.runner import Runner, TickReport

# Libraries stay quiet unless the application configures logging.
logging.getLogger("tickq").addHandler(logging.NullHandler())

__all__ = [
    "Backoff",
    "ChildFailed",
    "ConfigurationError",
    "DatabaseError",
    "Debounce",
    "EnqueueResult",
    "HandlerBatch",
    "InvalidJob",
    "InvalidParent",
    "InvalidStep",
    "InvalidTransition",
    "Job",
    "JobBatch",
    "JobCancelled",
    "JobContext",
    "JobNotFound",
    "JobSpec",
    "LeaseLost",
    "PermanentError",
    "PostgresStore",
    "QueueFull",
    "Registry",
    "Retry",
    "RetryAfter",
    "Runner",
    "Status",
    "StepStore",
    "Task",
    "Throttle",
    "TickReport",
    "TickqError",
    "UnknownJobType",
    "WaitTimeout",
    "complete_in",
    "enqueue",
    "enqueue_many",
    "ensure_partitions",
    "publish",
    "registry",
    "signal",
    "task",
]


def enqueue(
    conn: psycopg.Connection[Any],
    type: str,
    payload: Mapping[str, Any] | None = None,
    *,
    using: Registry | None = None,
    now: datetime | None = None,
    after: Iterable[UUID | str] | None = None,
    **options: Any,
) -> EnqueueResult:
    """Enqueue one job on the caller's connection; inside the caller's transaction it commits
    or rolls back with the caller's own writes. With `after` (job ids) it waits for those
    jobs to succeed, and is cancelled if one of them ends dead or cancelled."""
    store = _store(conn)
    tasks = using or registry
    catalog = store.task_catalog() if tasks.needs_catalog([type]) else None
    spec = tasks.spec(type, payload, catalog=catalog, **options)
    parents = dependencies.parents(after)
    if not parents:
        return store.enqueue(spec, now=now)
    return store.enqueue_after(JobBatch.of([spec]), [parents], now=now)[0]


def enqueue_many(
    conn: psycopg.Connection[Any],
    requests: Iterable[Mapping[str, Any]],
    *,
    using: Registry | None = None,
    now: datetime | None = None,
) -> list[EnqueueResult]:
    """Enqueue many jobs in one round trip; each request is a dict of enqueue's arguments.

    A request's "after" may name, besides job ids, the positions of earlier requests of the
    same call, so a whole graph is enqueued at once (two statements, one transaction).
    """
    requests = list(requests)
    if not any(isinstance(r, Mapping) and "after" in r for r in requests):
        store = _store(conn)
        batch = (using or registry).batch(requests, catalog=_catalog_for(store, using, requests))
        return store.enqueue_batch(batch, now=now)
    after = [
        dependencies.graph_parents(r.get("after"), position=i, field=f"jobs[{i}].after")
        for i, r in enumerate(requests)
    ]
    store = _store(conn)
    requested = [_without_after(r) for r in requests]
    batch = (using or registry).batch(requested, catalog=_catalog_for(store, using, requested))
    return store.enqueue_after(batch, after, now=now)


def _catalog_for(
    store: PostgresStore, using: Registry | None, requests: Sequence[Any]
) -> dict[str, dict[str, Any]] | None:
    """The task catalogue, when a request names a type the registry has no handler for."""
    types = [r.get("type") if isinstance(r, Mapping) else None for r in requests]
    return store.task_catalog() if (using or registry).needs_catalog(types) else None


def _without_after(request: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in request.items() if key != "after"}


def signal(
    conn: psycopg.Connection[Any],
    job_id: Any,
    name: str,
    payload: Any = None,
    *,
    now: datetime | None = None,
) -> bool:
    """Send the signal `name` to a job, on the caller's connection (inside the caller's
    transaction it is delivered when that commits). A job waiting for it in
    `job.wait_for(name)` becomes runnable at once; one sent before the job waits is kept.
    Returns whether it woke the job. An unknown or finished job is refused."""
    return _store(conn).steps.signal(job_id, name, payload, now=now)


# One store per connection, so the store's short-lived cache of "are any limits set?" spares
# every enqueue on the caller's connection an extra round trip. It is kept on the connection
# itself: a store holds its connection, so a map from connections to stores (even a weak
# one) would keep every connection a caller ever used.
_STORE_ATTRIBUTE = "_tickq_store"


def _store(conn: psycopg.Connection[Any]) -> PostgresStore:
    store = getattr(conn, _STORE_ATTRIBUTE, None)
    if not isinstance(store, PostgresStore):
        store = PostgresStore(conn)
        setattr(conn, _STORE_ATTRIBUTE, store)
    return store
