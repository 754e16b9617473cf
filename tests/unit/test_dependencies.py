"""Dependencies as pure values: parsing `after`, planning an enqueue, the waiting status and
the release and cascade rules over a graph."""

from __future__ import annotations

from uuid import UUID, uuid4

import pytest

from queue_core.errors import InvalidJob, InvalidParent, InvalidTransition
from queue_core.model import dependencies, transitions
from queue_core.model.dependencies import (
    MAX_PARENTS,
    ParentRow,
    graph_parents,
    parents,
    plan,
    settle,
)
from queue_core.model.jobs import Job, Status
from queue_core.model.validation import job_spec

from .factory import NOW, later, queued_job, with_status


def waiting_job() -> Job:
    return transitions.new_job(job_spec("embed"), id=uuid4(), now=NOW, waiting=True)


# The waiting status


def test_a_job_enqueued_waiting_is_never_runnable() -> None:
    job = waiting_job()

    assert job.status == Status.WAITING
    assert not transitions.is_runnable(job, later(3600))
    with pytest.raises(InvalidTransition):
        transitions.claim(job, now=NOW, lease_seconds=30, token=uuid4())


def test_release_makes_a_waiting_job_queued_and_keeps_its_run_after() -> None:
    job = waiting_job()

    released = transitions.release(job, now=later(5))

    assert released.status == Status.QUEUED and released.run_after == job.run_after
    assert transitions.is_runnable(released, later(5))


def test_only_a_waiting_job_is_released() -> None:
    with pytest.raises(InvalidTransition):
        transitions.release(queued_job(), now=NOW)


def test_a_waiting_job_is_cancelled_for_a_failed_parent_with_an_error_naming_it() -> None:
    parent = with_status(queued_job(), status=Status.DEAD)

    child = transitions.cancel_for_parent(waiting_job(), parent=parent, now=later(1))

    assert child.status == Status.CANCELLED
    assert child.error == f"parent {parent.id} is dead"
    assert child.finished_at == later(1)


def test_a_succeeded_parent_cancels_nothing() -> None:
    parent = with_status(queued_job(), status=Status.SUCCEEDED)
    with pytest.raises(InvalidTransition):
        transitions.cancel_for_parent(waiting_job(), parent=parent, now=NOW)


def test_cancelling_a_waiting_job_works_like_a_queued_one() -> None:
    assert transitions.cancel(waiting_job(), now=NOW).status == Status.CANCELLED


# Parsing `after`


def test_after_takes_distinct_ids_in_order() -> None:
    a, b = uuid4(), uuid4()
    assert parents([a, str(b), a]) == (a, b)
    assert parents(None) == ()


@pytest.mark.parametrize(
    "value, message",
    [
        ("abc", "must be a list of job ids"),
        ({"a": 1}, "must be a list of job ids"),
        (7, "must be a list of job ids"),
        ([1], "must be a UUID"),
        ([True], "must be a UUID"),
        (["x"], "must be a UUID"),
        ([uuid4() for _ in range(MAX_PARENTS + 1)], f"more than {MAX_PARENTS} parents"),
    ],
)
def test_bad_after_is_refused(value: object, message: str) -> None:
    with pytest.raises(InvalidJob, match=message):
        parents(value)


def test_a_graph_request_names_earlier_positions_only() -> None:
    a = uuid4()
    assert graph_parents([0, a, 1], position=2) == (0, a, 1)
    for bad in ([2], [3], [-1]):
        with pytest.raises(InvalidJob, match="not an earlier request"):
            graph_parents(bad, position=2)


def test_a_keyed_request_named_by_a_later_one_makes_the_call_sequential() -> None:
    assert dependencies.is_sequential(["k", None], [(), (0,)])
    assert not dependencies.is_sequential([None, "k"], [(), (0,)])


# Planning an enqueue


def test_plan_counts_unfinished_parents_and_waits_only_for_them() -> None:
    done, running = uuid4(), uuid4()
    ids = [uuid4(), uuid4(), uuid4()]
    found = {
        done: ParentRow(Status.SUCCEEDED, None),
        running: ParentRow(Status.RUNNING, None),
    }

    decided = plan(ids, [None] * 3, [(done,), (done, running), (0, done)], found)

    assert decided.statuses == [Status.QUEUED, Status.WAITING, Status.WAITING]
    assert decided.pending == [0, 1, 1]
    assert decided.has_children == [True, False, False]
    assert list(zip(decided.child_ids, decided.parent_ids, strict=True)) == [
        (ids[0], done),
        (ids[1], done),
        (ids[1], running),
        (ids[2], ids[0]),
        (ids[2], done),
    ]
    assert decided.earlier_parents == [done, running]


@pytest.mark.parametrize("status", [Status.DEAD, Status.CANCELLED])
def test_plan_refuses_a_parent_that_can_never_succeed(status: Status) -> None:
    parent = uuid4()
    with pytest.raises(InvalidParent, match="could never run"):
        plan([uuid4()], [None], [(parent,)], {parent: ParentRow(status, None)})


def test_plan_refuses_an_unknown_or_another_owners_parent_as_not_found() -> None:
    parent, owner = uuid4(), uuid4()
    found = {parent: ParentRow(Status.QUEUED, owner)}
    with pytest.raises(InvalidParent, match="not found"):
        plan([uuid4()], [None], [(uuid4(),)], found)
    with pytest.raises(InvalidParent, match="not found"):
        plan([uuid4()], [uuid4()], [(parent,)], found)
    assert plan([uuid4()], [owner], [(parent,)], found).statuses == [Status.WAITING]


# Settling a graph


def graph(*edges: tuple[int, int], size: int) -> tuple[list[Job], dict[UUID, list[UUID]]]:
    """Jobs 0..size-1, each waiting when it has a parent; edges are (child, parent)."""
    jobs = [queued_job() for _ in range(size)]
    parents_of: dict[UUID, list[UUID]] = {}
    for child, parent in edges:
        parents_of.setdefault(jobs[child].id, []).append(jobs[parent].id)
        jobs[child] = with_status(jobs[child], status=Status.WAITING)
    return jobs, parents_of


def end(jobs: list[Job], index: int, status: Status) -> dict[UUID, Job]:
    jobs[index] = with_status(jobs[index], status=status)
    return {job.id: job for job in jobs}


def test_a_child_is_released_only_when_its_last_parent_succeeds() -> None:
    jobs, parents_of = graph((2, 0), (2, 1), size=3)

    assert settle(end(jobs, 0, Status.SUCCEEDED), parents_of, [jobs[0].id], now=NOW) == {}
    changed = settle(end(jobs, 1, Status.SUCCEEDED), parents_of, [jobs[1].id], now=NOW)

    assert changed[jobs[2].id].status == Status.QUEUED


def test_a_failed_parent_cancels_descendants_transitively_but_not_other_branches() -> None:
    # 0 -> 1 -> 2, and 3 independent of 0 -> 4
    jobs, parents_of = graph((1, 0), (2, 1), (4, 3), size=5)

    changed = settle(end(jobs, 0, Status.DEAD), parents_of, [jobs[0].id], now=NOW)

    assert set(changed) == {jobs[1].id, jobs[2].id}
    for job in changed.values():
        assert job.status == Status.CANCELLED and job.error == f"parent {jobs[0].id} is dead"


def test_a_diamond_bottom_is_cancelled_once_by_the_least_failed_root() -> None:
    jobs, parents_of = graph((2, 0), (2, 1), (3, 2), size=4)
    jobs[0] = with_status(jobs[0], status=Status.CANCELLED)
    jobs[1] = with_status(jobs[1], status=Status.DEAD)
    everything = {job.id: job for job in jobs}

    changed = settle(everything, parents_of, [jobs[0].id, jobs[1].id], now=NOW)

    root = min((jobs[0], jobs[1]), key=lambda job: job.id)
    assert changed[jobs[3].id].error == f"parent {root.id} is {root.status.value}"
