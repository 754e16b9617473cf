"""Plain job values for unit tests: built through the same pure functions the engine uses."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from queue_core.model import transitions
from queue_core.model.jobs import Job
from queue_core.model.validation import job_spec

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LEASE = 30


def queued_job(*, now: datetime = NOW, **spec: Any) -> Job:
    """A job as enqueue leaves it: queued, never attempted, runnable at `now`."""
    return transitions.new_job(job_spec("embed", {"doc": 1}, **spec), id=uuid4(), now=now)


def running_job(*, now: datetime = NOW, token: UUID | None = None, **spec: Any) -> Job:
    """A freshly claimed job holding a lease of LEASE seconds."""
    return transitions.claim(
        queued_job(now=now, **spec), now=now, lease_seconds=LEASE, token=token or uuid4()
    )


def with_status(job: Job, **changes: Any) -> Job:
    return replace(job, **changes)


def later(seconds: float, base: datetime = NOW) -> datetime:
    return base + timedelta(seconds=seconds)
