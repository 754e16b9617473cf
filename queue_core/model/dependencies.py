"""Job dependencies: which parents an enqueue names, what a dependent enqueue
writes, and what a parent's end does to its descendants.

Pure functions: the store runs `plan` between locking the parents and inserting the jobs,
and tickq.jobs_settle (queue_core/schema/functions/) applies `settle`'s rules in SQL, in the
transaction that finishes the parents; the model-based tests hold the two to each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from queue_core.errors import InvalidJob, InvalidParent
from queue_core.model import transitions, validation
from queue_core.model.jobs import EnqueueResult, Job, Status

# More parents than this is refused: a fan-in that wide is better a job that waits on a
# summary. The bound keeps one enqueue's locks, and one parent's release, small.
MAX_PARENTS = 100

# At most this many children of finished parents are settled (released or cancelled) by
# one statement: the one that finishes the parents, or one round of a store's
# settle_pending. Equal to tickq.jobs_settle's default (the setting tickq.settle_budget).
SETTLE_BUDGET = 1000

# A parent as a request names it: an existing job's id, or (in enqueue_many) the position of
# an earlier request of the same call.
ParentRef = UUID | int


def parents(value: Any, field: str = "after") -> tuple[UUID, ...]:
    """The distinct existing jobs one enqueue waits for."""
    refs = graph_parents(value, position=None, field=field)
    return tuple(ref for ref in refs if isinstance(ref, UUID))


def graph_parents(
    value: Any, *, position: int | None, field: str = "after"
) -> tuple[ParentRef, ...]:
    """The distinct parents of the request at `position` of an enqueue_many call: job ids,
    or positions of earlier requests (so a whole graph is enqueued in one call). Without a
    position (a single enqueue), job ids only."""
    if value is None:
        return ()
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise InvalidJob(field, f"must be a list of job ids, got {type(value).__name__}")
    refs: list[ParentRef] = []
    for item in value:
        ref: ParentRef
        if position is not None and isinstance(item, int) and not isinstance(item, bool):
            if not 0 <= item < position:
                earlier = f"0-{position - 1}" if position else "none: this is the first request"
                raise InvalidJob(
                    field, f"position {item} is not an earlier request of this call ({earlier})"
                )
            ref = item
        else:
            ref = validation.uuid(item, field)
        if ref not in refs:
            refs.append(ref)
        if len(refs) > MAX_PARENTS:
            raise InvalidJob(field, f"names more than {MAX_PARENTS} parents")
    return tuple(refs)


def is_sequential(keys: Sequence[str | None], after: Sequence[Sequence[ParentRef]]) -> bool:
    """Whether a request with an idempotency key is a parent of a later one in the same call.

    Such a request may land on an existing job (a duplicate), whose id and status only the
    database knows, so its children must be enqueued after it, one statement each.
    """
    return any(isinstance(ref, int) and keys[ref] is not None for refs in after for ref in refs)


def resolve(refs: Sequence[ParentRef], results: Sequence[EnqueueResult | None]) -> tuple[UUID, ...]:
    """Positions replaced by the jobs the earlier requests landed on."""
    out: list[UUID] = []
    for ref in refs:
        if isinstance(ref, int):
            result = results[ref]
            assert result is not None, "an earlier request is resolved before its children"
            ref = result.id
        if ref not in out:
            out.append(ref)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Relative:
    """A parent or child of a job, as `tickq show`, the API and the job page list them."""

    relation: str  # "parent", "child", or a workflow's "spawned" / "spawned_by"
    id: UUID
    type: str
    status: Status


def family(relatives: Iterable[Relative]) -> dict[str, list[dict[str, str]]]:
    """A job's parents ("after", as enqueue names them) and its children, JSON-ready; a
    workflow's children (job.map, job.call) and the parent awaiting it are listed apart."""
    keys = {
        "parent": "after",
        "child": "children",
        "spawned": "spawned",
        "spawned_by": "spawned_by",
    }
    out: dict[str, list[dict[str, str]]] = {"after": [], "children": []}
    for r in relatives:
        entry = {"id": str(r.id), "type": r.type, "status": r.status.value}
        out.setdefault(keys[r.relation], []).append(entry)
    return out


@dataclass(frozen=True, slots=True)
class Plan:
    """What a dependent enqueue inserts: per job its status, its count of unfinished parents
    and whether a later job of the call waits for it; and the edges (child, parent)."""

    statuses: list[Status]
    pending: list[int]
    has_children: list[bool]
    child_ids: list[UUID]
    parent_ids: list[UUID]
    earlier_parents: list[UUID]  # existing jobs that gain children
    # Per edge: whether the child's count of unfinished parents includes this parent, so
    # only its success releases the child (a parent that already succeeded does not).
    counted: list[bool]


@dataclass(frozen=True, slots=True)
class ParentRow:
    """An existing parent as jobs_parents_lock read it, under its row lock."""

    status: Status
    user_id: UUID | None


def plan(
    ids: Sequence[UUID],
    user_ids: Sequence[UUID | None],
    after: Sequence[Sequence[ParentRef]],
    found: Mapping[UUID, ParentRow],
) -> Plan:
    """Decide a dependent enqueue, or refuse it (InvalidParent) before anything is written.

    A parent must be a job its child's owner owns (another user's job is "not found", as
    row-level security would have it), and neither dead nor cancelled: the child could never
    run. A parent that already succeeded is not waited for.
    """
    statuses: list[Status] = []
    pending: list[int] = []
    has_children = [False] * len(ids)
    child_ids: list[UUID] = []
    parent_ids: list[UUID] = []
    counted: list[bool] = []
    earlier: dict[UUID, None] = {}
    for index, refs in enumerate(after):
        unfinished = 0
        for ref in refs:
            if isinstance(ref, int):
                has_children[ref] = True
                parent_id = ids[ref]
                waits = True  # enqueued by this very call: not finished yet
            else:
                row = found.get(ref)
                if row is None or row.user_id != user_ids[index]:
                    raise InvalidParent(ref, "not found")
                if row.status in (Status.DEAD, Status.CANCELLED):
                    raise InvalidParent(
                        ref, f"is {row.status.value}: a job after it could never run"
                    )
                parent_id = ref
                earlier[ref] = None
                waits = row.status != Status.SUCCEEDED
            unfinished += waits
            child_ids.append(ids[index])
            parent_ids.append(parent_id)
            counted.append(waits)
        statuses.append(Status.WAITING if unfinished else Status.QUEUED)
        pending.append(unfinished)
    return Plan(statuses, pending, has_children, child_ids, parent_ids, list(earlier), counted)


def settle(
    jobs: Mapping[UUID, Job],
    parents_of: Mapping[UUID, Sequence[UUID]],
    ended: Iterable[UUID],
    *,
    now: datetime,
) -> dict[UUID, Job]:
    """The jobs that change because the jobs `ended` just finished (`jobs` already shows
    their end): a waiting child whose parents have all succeeded is released; every waiting
    descendant of a dead or cancelled job is cancelled, naming that job (the least id when
    several reach it). The rules tickq.jobs_settle applies in SQL, in the same order."""
    children_of: dict[UUID, list[UUID]] = {}
    for child, its_parents in parents_of.items():
        for parent_id in its_parents:
            children_of.setdefault(parent_id, []).append(child)
    finished = sorted((jobs[i] for i in ended), key=lambda job: job.id)
    changed = _released(jobs, parents_of, children_of, finished, now)
    current = {**jobs, **changed}
    for child_id, root in _doomed(current, children_of, finished).items():
        changed[child_id] = transitions.cancel_for_parent(current[child_id], parent=root, now=now)
    return changed


def _released(
    jobs: Mapping[UUID, Job],
    parents_of: Mapping[UUID, Sequence[UUID]],
    children_of: Mapping[UUID, Sequence[UUID]],
    finished: Sequence[Job],
    now: datetime,
) -> dict[UUID, Job]:
    """Waiting children of the succeeded jobs whose every parent has succeeded, released."""
    released: dict[UUID, Job] = {}
    for parent in finished:
        if parent.status != Status.SUCCEEDED:
            continue
        for child_id in children_of.get(parent.id, ()):
            child = jobs[child_id]
            ready = all(jobs[p].status == Status.SUCCEEDED for p in parents_of[child_id])
            if child.status == Status.WAITING and ready and child_id not in released:
                released[child_id] = transitions.release(child, now=now)
    return released


def _doomed(
    jobs: Mapping[UUID, Job], children_of: Mapping[UUID, Sequence[UUID]], finished: Sequence[Job]
) -> dict[UUID, Job]:
    """Waiting descendants of the dead or cancelled jobs (through waiting jobs only), each
    with the failed job it is cancelled for: `finished` is in id order, so the least."""
    root_of: dict[UUID, Job] = {}
    for root in finished:
        if root.status not in (Status.DEAD, Status.CANCELLED):
            continue
        frontier = [root.id]
        while frontier:
            below = [c for p in frontier for c in children_of.get(p, ())]
            frontier = []
            for child_id in below:
                if jobs[child_id].status == Status.WAITING and child_id not in root_of:
                    root_of[child_id] = root
                    frontier.append(child_id)
    return root_of
