"""A job's lifecycle events as values: which a task may opt into, and the event an outcome
carries to the finish statement (queue_core/policies/outbox.py writes and publishes them)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from queue_core.errors import InvalidJob
from queue_core.model.jobs import Job, Outcome, Status

# A job's lifecycle events a task may opt into, by the status its outcome sets; `Job Dead`
# is always written.
EVENT_NAMES = {
    "succeeded": Status.SUCCEEDED,
    "retrying": Status.RETRYING,
    "cancelled": Status.CANCELLED,
}
DETAIL_TYPES = {
    Status.SUCCEEDED: "Job Succeeded",
    Status.RETRYING: "Job Retrying",
    Status.CANCELLED: "Job Cancelled",
    Status.DEAD: "Job Dead",
}


def lifecycle_event(job: Job, status: Status, error: str | None) -> str:
    """The outcome's `event` as the finish statement takes it (JSON text): the event a task
    opted into, with the detail `Job Dead` carries (tickq.outbox_job_dead), its counts as
    the views show them, not as a saga's compensation raised them."""
    detail = {
        "id": str(job.id),
        "type": job.type,
        "queue": job.queue,
        **job.shown_counts,
        "error": error,
    }
    return json.dumps(
        {
            "user_id": None if job.user_id is None else str(job.user_id),
            "detail_type": DETAIL_TYPES[status],
            "detail": detail,
        }
    )


def with_opted_event(opted: frozenset[Status], job: Job, outcome: Outcome) -> Outcome:
    """The outcome carrying its event when its status is one the task opted into: the one
    rule of every path that finishes an attempt (the runner's finish, a completion in the
    handler's transaction), so each writes the same events with the outcome it persists."""
    if outcome.status not in opted:
        return outcome
    return dataclasses.replace(
        outcome, event_json=lifecycle_event(job, outcome.status, outcome.error)
    )


def event_statuses(names: Iterable[Any]) -> frozenset[Status]:
    """The statuses of the events a task opts into, checked (`Job Dead` needs no opting)."""
    if isinstance(names, str):
        raise InvalidJob("events", "must be a list of event names, not a string")
    chosen = set()
    for name in names:
        if name == "dead":
            continue
        if name not in EVENT_NAMES:
            known = ", ".join([*EVENT_NAMES, "dead"])
            raise InvalidJob("events", f"unknown event {name!r} (known: {known})")
        chosen.add(EVENT_NAMES[name])
    return frozenset(chosen)
