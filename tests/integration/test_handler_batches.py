"""Batch consume against a real database: a batch handler gets up to its batch size of a
claim's jobs of its type in one call, each job settled on its own (results in order,
batch.fail, batch.retry_after), other types in the claim run alone, and each job's view
names the call it was part of."""

from __future__ import annotations

from collections import Counter
from typing import Any
from uuid import UUID

import psycopg
import pytest

from queue_core import (
    ConfigurationError,
    HandlerBatch,
    InvalidJob,
    JobContext,
    PermanentError,
    PostgresStore,
    Registry,
    Runner,
    Status,
    StepStore,
)

INSTANT = {"base": 0.001, "max": 0.001}


@pytest.fixture
def store(conn: psycopg.Connection) -> PostgresStore:
    return PostgresStore(conn)


def enqueue(store: PostgresStore, registry: Registry, type_: str, count: int) -> list[UUID]:
    return [store.enqueue(registry.spec(type_, {"n": n})).id for n in range(count)]


def test_120_jobs_go_in_calls_of_at_most_50_each_with_its_own_result_and_one_failure_retries_alone(
    store: PostgresStore,
) -> None:
    registry = Registry()
    calls: list[list[int]] = []

    @registry.task("embed", batch_size=50, backoff=INSTANT)
    def embed(batch: HandlerBatch) -> list[dict[str, int]]:
        calls.append([job.payload["n"] for job in batch.jobs])
        for job in batch.jobs:
            if job.payload["n"] == 77 and job.attempt == 1:
                batch.fail(job, RuntimeError("embedding service refused document 77"))
        return [{"doubled": job.payload["n"] * 2} for job in batch.jobs]

    ids = enqueue(store, registry, "embed", 120)
    with Runner(store, registry, batch_size=100) as runner:
        for _ in range(10):
            runner.tick()
            if all(store.get(i).is_terminal for i in ids):
                break

    assert max(len(call) for call in calls) == 50
    assert sorted(n for call in calls for n in call) == sorted([*range(120), 77])
    assert [call for call in calls if 77 in call][-1] == [77]  # its retry held it alone
    for n, job_id in enumerate(ids):
        job = store.get(job_id)
        assert (job.status, job.result) == (Status.SUCCEEDED, {"doubled": n * 2}), n
        assert job.attempts == (2 if n == 77 else 1)
    assert store.get(ids[77]).errors[0]["error"] == (
        "RuntimeError: embedding service refused document 77"
    )


def test_a_claim_with_other_types_hands_the_batch_handler_only_its_own(
    store: PostgresStore,
) -> None:
    registry = Registry()
    seen: list[list[str]] = []
    registry.task("embed", batch_size=10)(lambda batch: seen.append([j.type for j in batch.jobs]))
    registry.task("plain")(lambda job: {"alone": job.payload["n"]})

    embeds = enqueue(store, registry, "embed", 4)
    plains = enqueue(store, registry, "plain", 3)
    with Runner(store, registry, batch_size=20) as runner:
        report = runner.tick()

    assert seen == [["embed"] * 4]
    assert report.succeeded == 7
    assert [store.get(i).result for i in plains] == [{"alone": n} for n in range(3)]
    assert all(store.get(i).result is None for i in embeds)


def test_every_job_of_a_call_names_the_same_batch_in_its_view(store: PostgresStore) -> None:
    registry = Registry()
    batch_ids: list[UUID] = []
    registry.task("embed", batch_size=3)(lambda batch: batch_ids.append(batch.id))
    registry.task("plain")(lambda job: None)

    ids = enqueue(store, registry, "embed", 5)
    plain = enqueue(store, registry, "plain", 1)[0]
    with Runner(store, registry, batch_size=10, concurrency=1) as runner:
        runner.tick()

    views = [StepStore(store).show(i) for i in ids]
    assert [v.batch_id for v in views] == [batch_ids[0]] * 3 + [batch_ids[1]] * 2
    assert views[0].handling() == [f"part of batch {batch_ids[0]}"]
    assert StepStore(store).show(plain).batch_id is None


def test_raising_fails_every_job_not_settled_before(store: PostgresStore) -> None:
    registry = Registry()

    @registry.task("embed", batch_size=10)
    def embed(batch: HandlerBatch) -> None:
        batch.retry_after(batch.jobs[0], 60)
        raise PermanentError("the model was removed")

    ids = enqueue(store, registry, "embed", 3)
    with Runner(store, registry) as runner:
        report = runner.tick()

    first, *rest = (store.get(i) for i in ids)
    assert (first.status, first.error, first.max_attempts, first.snoozes) == (
        Status.QUEUED,
        None,
        3,
        1,
    )
    assert [(j.status, j.error) for j in rest] == [
        (Status.DEAD, "PermanentError: the model was removed")
    ] * 2
    assert (report.snoozed, report.dead) == (1, 2)


@pytest.mark.parametrize(
    ("returned", "shown"), [([1, 2], "2 results"), ({"a": 1}, "a dict"), ("abc", "a str")]
)
def test_a_result_that_is_not_one_per_job_fails_them_all_saying_so(
    store: PostgresStore, returned: Any, shown: str
) -> None:
    registry = Registry()
    registry.task("embed", batch_size=10, backoff=INSTANT)(lambda batch: returned)

    ids = enqueue(store, registry, "embed", 3)
    with Runner(store, registry) as runner:
        runner.tick(max_batches=1)

    errors = Counter(store.get(i).error for i in ids)
    assert errors == {
        f"BatchResultMismatch: the batch handler returned {shown} for 3 jobs: return None "
        "or a list of 3 results, one per job in order": 3
    }
    assert {store.get(i).status for i in ids} == {Status.RETRYING}


def test_an_async_batch_handler_gets_its_jobs_in_one_call(store: PostgresStore) -> None:
    registry = Registry()
    sizes: list[int] = []

    @registry.task("embed", batch_size=4)
    async def embed(batch: HandlerBatch) -> list[int]:
        sizes.append(len(batch))
        return [job.payload["n"] for job in batch]

    ids = enqueue(store, registry, "embed", 6)
    with Runner(store, registry, batch_size=10) as runner:
        runner.tick()

    assert sorted(sizes) == [2, 4]  # the calls run at once, in any order
    assert [store.get(i).result for i in ids] == list(range(6))


def test_a_batch_handlers_jobs_keep_their_own_leases_and_refuse_steps(
    store: PostgresStore,
) -> None:
    registry = Registry()
    leases: list[Any] = []

    @registry.task("embed", batch_size=10, backoff=INSTANT)
    def embed(batch: HandlerBatch) -> None:
        batch.extend_lease(600)
        leases.extend(store.get(job.id).lease_until for job in batch.jobs)
        batch.jobs[0].step("fetch", lambda: 1)

    ids = enqueue(store, registry, "embed", 2)
    now = store.now()
    with Runner(store, registry, lease_seconds=30) as runner:
        runner.tick(max_batches=1)

    assert all((lease - now).total_seconds() > 500 for lease in leases)
    assert "durable steps need a job run by a Runner on its own" in (store.get(ids[0]).error or "")


def test_settling_a_job_of_another_batch_is_refused(store: PostgresStore) -> None:
    registry = Registry()
    errors: list[str] = []

    @registry.task("embed", batch_size=10)
    def embed(batch: HandlerBatch) -> None:
        try:
            batch.fail(UUID(int=1), "no such job")
        except ValueError as exc:
            errors.append(str(exc))

    ids = enqueue(store, registry, "embed", 1)
    with Runner(store, registry) as runner:
        runner.tick()

    assert errors == [f"job {UUID(int=1)} is not part of batch {errors[0].split()[-1]}"]
    assert store.get(ids[0]).status == Status.SUCCEEDED


def test_bad_batch_options_fail_at_the_decorator() -> None:
    registry = Registry()

    with pytest.raises(InvalidJob, match="batch_size"):
        registry.task("a", batch_size=0)
    with pytest.raises(InvalidJob, match="batch_size"):
        registry.task("a", batch_size=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="durable steps"):
        registry.task("a", batch_size=5, step_seconds=1)

    def plain(job: JobContext) -> None:
        return None

    registry.task("b")(plain)
    assert not registry.batched
