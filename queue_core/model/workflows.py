"""Durable workflows as pure transitions: child jobs a step maps (enqueued with the parent's
suspension, released at most `max_running` at a time, counting the parent down and waking
it), the children a dead or cancelled parent takes with it, the tries of retried steps and
undos, and the compensations a saga begins away from its handler (a cancel while it does
not run, the reclaim that would end it). Every function takes `now` and reads no clock;
the store does the same in SQL (postgres/steps.sql, reads.sql's jobs_cancel, leases.sql's
jobs_reclaim, functions/job_children_cancel.sql) and the model-based test holds the two to
each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from uuid import UUID

from queue_core.errors import InvalidTransition
from queue_core.model import transitions
from queue_core.model.jobs import TERMINAL, Job, JobSpec, Outcome, Status
from queue_core.model.steps import (
    FOREVER,
    UNDO_TRIES,
    Durable,
    Wait,
    WaitKind,
    _check_lease,
    suspend,
)
from queue_core.model.transitions import new_job


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
    durable: dict[UUID, Durable] | None = None,
) -> tuple[dict[UUID, Job], dict[UUID, Waiting]]:
    """What jobs that just finished do to their workflow's other side: a parent ending dead
    or cancelled cancels its unfinished children (cancel_children: a saga owing undos
    compensates first, its state in `durable` updated in place), transitively; a child
    that ended counts its waiting parent down, releases its next waiting siblings
    (children run in their step's order: the first max_running + ended of them) and wakes
    the parent when none is left. Returns the jobs and the waits that changed."""
    jobs = dict(jobs)
    waits = dict(waiting)
    failed = [j for j in ended if j.status is not Status.SUCCEEDED]
    cancel_children(jobs, links, failed, now, {} if durable is None else durable)
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


def cancel_children(
    jobs: dict[UUID, Job],
    links: Sequence[Link],
    failed: Sequence[Job],
    now: datetime,
    durable: dict[UUID, Durable],
) -> None:
    """The children of jobs that ended dead or cancelled (or began compensating to end so)
    go with them, transitively, in place: a running one asked to stop, one not running
    cancelled, but for a saga that owes undos, which begins its compensation instead (and
    takes its own children), and one compensating already, which is left to finish."""
    failed = [j for j in failed if j.status in (Status.DEAD, Status.CANCELLED)]
    while failed:
        doomed: list[Job] = []
        for parent in failed:
            for link in links:
                if link.parent != parent.id:
                    continue
                child = jobs[link.child]
                if child.status is Status.RUNNING:
                    if not child.cancel_requested:
                        jobs[child.id] = replace(child, cancel_requested=True, updated_at=now)
                    continue
                if child.status not in (Status.WAITING, Status.QUEUED, Status.RETRYING):
                    continue
                state = durable.get(child.id, Durable())
                spare = compensation_spare(child, state)
                if spare is None:
                    continue  # compensating already: left to finish
                if spare:
                    error = transitions.parent_failed_error(parent.id, parent.status)
                    jobs[child.id], durable[child.id] = _compensating(
                        child, state, spare, Status.CANCELLED, error, now
                    )
                    doomed.append(replace(jobs[child.id], status=Status.CANCELLED))
                    continue
                named = child.status is Status.WAITING  # as the dependency cascade
                gone = replace(
                    child,
                    status=Status.CANCELLED,
                    error=transitions.parent_failed_error(parent.id, parent.status)
                    if named
                    else child.error,
                    updated_at=now,
                    finished_at=now,
                )
                jobs[child.id] = gone
                doomed.append(gone)
        failed = doomed


def compensation_spare(job: Job, state: Durable) -> int | None:
    """The attempts a job ended away from its handler must be left for its undos: 0 when it
    owes none (no stored step has an undo, or it never ran), its undoable steps x UNDO_TRIES
    + 1 when it owes them, None when its compensation has begun already."""
    if state.compensation() is not None:
        return None
    if not state.undoable or (job.attempts == 0 and not state.resumes):
        return 0
    return len(state.undoable) * UNDO_TRIES + 1


def _compensating(
    job: Job, state: Durable, spare: int, ends: Status, error: str, now: datetime
) -> tuple[Job, Durable]:
    """A saga not running made to compensate: runnable at once with `spare` attempts more,
    its compensation recorded (its handler, replayed, runs the undos, then ends it)."""
    job = replace(_raised(job, spare), run_after=min(job.run_after, now), updated_at=now)
    entry = {"tries": 0, "error": error, "done": False}
    return job, replace(state, tries={**state.tries, f"compensation:{ends.value}": entry})


def _raised(job: Job, spare: int) -> Job:
    """The job with `spare` attempts for its compensation, which the engine counts against;
    the max_attempts declared and the attempts counted so far kept (from the first time)
    so the views show them apart (Job.compensation_runs)."""
    return replace(
        job,
        max_attempts=max(job.max_attempts, job.attempts + spare),
        declared_max_attempts=(
            job.max_attempts if job.declared_max_attempts is None else job.declared_max_attempts
        ),
        compensation_attempts=(
            job.attempts if job.compensation_attempts is None else job.compensation_attempts
        ),
    )


def cancel(job: Job, state: Durable, *, now: datetime) -> tuple[Job, Durable]:
    """A cancel (the API's, the CLI's, the operator's): as transitions.cancel, but a saga
    not running that owes undos compensates first (see _compensating) and one compensating
    already is left to finish (only its time moves). The caller cancels the workflow
    children of a saga that began compensating (cancel_children) as of a cancelled job."""
    spare = compensation_spare(job, state) if job.status in (Status.QUEUED, Status.RETRYING) else 0
    if spare is None:
        return replace(job, updated_at=now), state
    if spare:
        return _compensating(job, state, spare, Status.CANCELLED, "cancelled", now)
    return transitions.cancel(job, now=now), state


def reclaim(job: Job, state: Durable, *, now: datetime) -> tuple[Job, Durable]:
    """The reclaim of an expired lease (transitions.reclaim), but a saga it would end (asked
    to cancel, or on its last attempt) that owes undos goes back to run them at once, its
    compensation recorded with the status it was to end in and the error that ended it; a
    compensating one's cancel is taken as its compensation's (it goes on, or runs out of
    attempts)."""
    if not transitions.is_reclaimable(job, now):
        raise InvalidTransition(job.id, job.status, "reclaim")
    ends = job.cancel_requested or job.attempts >= job.max_attempts
    spare = compensation_spare(job, state) if ends else 0
    if spare is None:
        return transitions.reclaim(replace(job, cancel_requested=False), now=now), state
    if not spare:
        return transitions.reclaim(job, now=now), state
    error = "cancelled while running" if job.cancel_requested else transitions.RECLAIM_ERROR
    status = Status.CANCELLED if job.cancel_requested else Status.DEAD
    assert job.lease_token is not None  # running, as is_reclaimable checked
    outcome = Outcome(job.id, job.lease_token, Status.RETRYING, error=error, delay=0)
    retried = transitions.finish(job, outcome, now=now)
    retried = _raised(retried, spare)
    entry = {"tries": 0, "error": error, "done": False}
    return retried, replace(state, tries={**state.tries, f"compensation:{status.value}": entry})


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
    job = replace(_raised(job, spare), cancel_requested=False)
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
