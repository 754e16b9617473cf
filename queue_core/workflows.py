"""Durable workflows as pure transitions: child jobs a step maps (enqueued with the parent's
suspension, released at most `max_running` at a time, counting the parent down and waking
it), the children a dead or cancelled parent takes with it, and the tries of retried steps
and undos. Every function takes `now` and reads no clock; the store does the same in SQL
(sql/steps.sql, functions/job_children_settle.sql) and the model-based test holds the two
to each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from uuid import UUID

from .errors import InvalidTransition
from .jobs import TERMINAL, Job, JobSpec, Status
from .steps import FOREVER, Durable, Wait, WaitKind, _check_lease, suspend
from .transitions import new_job


@dataclass(frozen=True, slots=True)
class Link:
    """A child of a job's map step (tickq.job_children)."""

    parent: UUID
    step: str
    index: int
    child: UUID
    max_running: int
    siblings: int


@dataclass(frozen=True, slots=True)
class Waiting:
    """A parent suspended until the children of one step have ended: how many have not."""

    step: str
    pending: int


def enqueue_children(
    parent: Job,
    state: Durable,
    *,
    token: Any,
    step: str,
    spec: JobSpec,
    ids: Sequence[UUID],
    payloads: Sequence[dict[str, Any]],
    max_running: int,
    now: datetime,
) -> tuple[Job, Durable, list[Job], list[Link]]:
    """The children (the first `max_running` queued, the rest waiting) in the parent's queue,
    group, owner and priority, and the parent suspended until they end: one transition, as
    the store makes it one statement. A parent asked to cancel enqueues none."""
    _check_lease(parent, token)
    if parent.cancel_requested:
        raise InvalidTransition(parent.id, "asked to cancel", "map")
    children = [
        replace(
            new_job(spec, id=child, now=now, payload=payload, run_after=now),
            status=Status.QUEUED if i < max_running else Status.WAITING,
            queue=parent.queue,
            user_id=parent.user_id,
            priority=parent.priority,
            group_key=parent.group_key,
            has_children=True,
        )
        for i, (child, payload) in enumerate(zip(ids, payloads, strict=True))
    ]
    links = [Link(parent.id, step, i, child, max_running, len(ids)) for i, child in enumerate(ids)]
    suspended = replace(
        parent,
        status=Status.QUEUED,
        attempts=parent.attempts - 1,
        run_after=FOREVER,
        lease_until=None,
        lease_token=None,
        has_children=True,
        updated_at=now,
    )
    waits = replace(state, resumes=state.resumes + 1, wait=Wait(WaitKind.CHILDREN, step, FOREVER))
    return suspended, waits, children, links


def settle_children(
    jobs: Mapping[UUID, Job],
    links: Sequence[Link],
    waiting: Mapping[UUID, Waiting],
    ended: Sequence[Job],
    *,
    now: datetime,
) -> tuple[dict[UUID, Job], dict[UUID, Waiting]]:
    """What jobs that just finished do to their workflow's other side: a parent ending dead
    or cancelled cancels its unfinished children (asks a running one to stop), transitively;
    a child that ended counts its waiting parent down, releases its next waiting siblings
    (children run in their step's order: the first max_running + ended of them) and wakes
    the parent when none is left. Returns the jobs and the waits that changed."""
    jobs = dict(jobs)
    waits = dict(waiting)
    _cancel_children(jobs, links, [j for j in ended if j.status is not Status.SUCCEEDED], now)
    ended_ids = {j.id for j in ended if j.status in TERMINAL}
    groups: dict[tuple[UUID, str], int] = {}
    for link in links:
        if link.child in ended_ids:
            groups[(link.parent, link.step)] = groups.get((link.parent, link.step), 0) + 1
    for (parent_id, step), n in sorted(groups.items()):
        parent = jobs[parent_id]
        wait = waits.get(parent_id)
        if parent.status in TERMINAL or wait is None or wait.step != step:
            continue
        first = next(k for k in links if k.parent == parent_id and k.step == step)
        left = max(wait.pending - n, 0)
        waits[parent_id] = replace(wait, pending=left)
        if wait.pending - n <= 0:
            parent = replace(parent, run_after=min(parent.run_after, now))
        jobs[parent_id] = replace(parent, updated_at=now)
        low = first.max_running + first.siblings - left - n
        high = first.max_running + first.siblings - left
        for link in links:
            if link.parent == parent_id and link.step == step and low <= link.index < high:
                child = jobs[link.child]
                if child.status is Status.WAITING:
                    jobs[link.child] = replace(child, status=Status.QUEUED, updated_at=now)
    return jobs, waits


def _cancel_children(
    jobs: dict[UUID, Job], links: Sequence[Link], failed: Sequence[Job], now: datetime
) -> None:
    failed = [j for j in failed if j.status in (Status.DEAD, Status.CANCELLED)]
    while failed:
        doomed: list[Job] = []
        for parent in failed:
            for link in links:
                if link.parent != parent.id:
                    continue
                child = jobs[link.child]
                if child.status is Status.RUNNING and not child.cancel_requested:
                    jobs[child.id] = replace(child, cancel_requested=True, updated_at=now)
                elif child.status in (Status.WAITING, Status.QUEUED, Status.RETRYING):
                    named = child.status is Status.WAITING  # as the dependency cascade
                    gone = replace(
                        child,
                        status=Status.CANCELLED,
                        error=f"parent {parent.id} is {parent.status.value}"
                        if named
                        else child.error,
                        updated_at=now,
                        finished_at=now,
                    )
                    jobs[child.id] = gone
                    doomed.append(gone)
        failed = doomed


def tried(state: Durable, *, kind: str, name: str, add: int, error: str | None) -> Durable:
    """One more try counted (of a retried step, an undo, or a compensation begun), keeping
    the last error given."""
    key = f"{kind}:{name}"
    entry = state.tries.get(key)
    tries = (int(entry["tries"]) if entry else 0) + add
    kept = error if error is not None else (entry or {}).get("error")
    done = bool(entry and entry.get("done"))
    return replace(state, tries={**state.tries, key: {"tries": tries, "error": kept, "done": done}})


def step_failed(
    job: Job,
    state: Durable,
    *,
    token: Any,
    kind: str,
    name: str,
    error: str,
    delay: float | None,
    wake: datetime,
    add: int = 1,
    now: datetime,
) -> tuple[Job, Durable]:
    """A failed try counted; with a delay, the job suspended until `wake`, in one transition
    (a job asked to cancel is refused, nothing counted)."""
    _check_lease(job, token)
    if delay is None:
        return job, tried(state, kind=kind, name=name, add=add, error=error)
    job, state = suspend(job, state, token=token, wait=Wait(WaitKind.SUSPEND, None, wake), now=now)
    return job, tried(state, kind=kind, name=name, add=add, error=error)


def compensation_begun(
    job: Job, state: Durable, *, token: Any, ends: Status, error: str, spare: int
) -> tuple[Job, Durable]:
    """The compensation recorded (kept from the first time) with attempts to spare, a cancel
    asked of the job taken as done."""
    _check_lease(job, token)
    job = replace(
        job, max_attempts=max(job.max_attempts, job.attempts + spare), cancel_requested=False
    )
    key = f"compensation:{ends.value}"
    if key in state.tries:
        return job, state
    return job, replace(
        state, tries={**state.tries, key: {"tries": 0, "error": error, "done": False}}
    )


def undo_done(job: Job, state: Durable, *, token: Any, name: str) -> Durable:
    """An undo that ran to the end, recorded once (it was counted before it ran)."""
    _check_lease(job, token)
    entry = state.tries.get(f"undo:{name}")
    if entry is None or entry.get("done"):
        raise InvalidTransition(job.id, "undone", f"undo {name!r}")
    return replace(state, tries={**state.tries, f"undo:{name}": {**entry, "done": True}})
