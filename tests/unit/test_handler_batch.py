"""Batch consume as plain values: how a claim is split into handler calls, and how each
job of a call is settled (its own settlement first, else the call's)."""

from __future__ import annotations

from dataclasses import replace
from uuid import uuid4

import pytest

from queue_core.errors import PermanentError, RetryAfter
from queue_core.model import transitions
from queue_core.model.jobs import Job, Outcome, Status
from queue_core.runner.batch_handler import HandlerBatch, group
from queue_core.runner.context import JobContext
from queue_core.store.memory import MemoryStore
from tests.unit.factory import running_job


def jobs_of(*types: str) -> list[Job]:
    return [replace(running_job(), type=t) for t in types]


def judge(job: Job, exc: BaseException) -> Outcome:
    if isinstance(exc, RetryAfter):
        return transitions.snoozed(job, exc.seconds)
    return transitions.failed(job, str(exc), permanent=isinstance(exc, PermanentError))


def batch_of(jobs: list[Job]) -> HandlerBatch:
    return HandlerBatch(uuid4(), [JobContext(job, MemoryStore(), 30) for job in jobs])


def test_a_claim_splits_into_chunks_of_each_batch_size_in_claim_order_and_singles() -> None:
    jobs = jobs_of("a", "p", "a", "b", "a", "b", "p", "a")

    units = group(jobs, [2 if j.type == "a" else 3 if j.type == "b" else None for j in jobs])

    assert units == [[0, 2], [1], [3, 5], [4, 7], [6]]


def test_a_claim_without_batch_handlers_is_one_call_per_job() -> None:
    assert group(jobs_of("p", "q"), [None, None]) == [[0], [1]]


def test_results_go_to_jobs_in_order_and_settlements_come_first() -> None:
    jobs = jobs_of("a", "a", "a")
    batch = batch_of(jobs)
    batch.fail(batch.jobs[1], "bad input")
    batch.retry_after(jobs[2], 5)  # a row works as well as the job's context

    outcomes = batch.outcomes(["r0", "r1", "r2"], None, judge=judge, succeed=transitions.succeeded)

    assert [o.status for o in outcomes] == [Status.SUCCEEDED, Status.RETRYING, Status.QUEUED]
    assert (outcomes[0].result_json, outcomes[1].error, outcomes[2].delay) == (
        '"r0"',
        "bad input",
        5,
    )


def test_raising_fails_only_the_jobs_not_settled() -> None:
    batch = batch_of(jobs_of("a", "a"))
    batch.fail(batch.jobs[0], PermanentError("gone"))

    outcomes = batch.outcomes(
        None, RuntimeError("api down"), judge=judge, succeed=transitions.succeeded
    )

    assert [(o.status, o.error) for o in outcomes] == [
        (Status.DEAD, "gone"),
        (Status.RETRYING, "api down"),
    ]


def test_a_job_outside_the_batch_cannot_be_settled() -> None:
    batch = batch_of(jobs_of("a"))

    with pytest.raises(ValueError, match="is not part of batch"):
        batch.fail(running_job(), "x")
