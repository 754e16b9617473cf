"""What the in-memory store does with the parts of the port only a database keeps
(dependencies, durable steps), and the views the shells read from it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from queue_core import ConfigurationError, JobBatch, Registry, Runner, Status
from queue_core.console.jobs import JobFilter
from queue_core.model import transitions
from queue_core.model.fairness import GroupStats
from queue_core.model.steps import WaitKind
from queue_core.store.memory import MemoryStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def registry_of(*types: str) -> Registry:
    registry = Registry()
    for type_ in types:
        registry.task(type_)(lambda job: None)
    return registry


def test_a_handler_step_on_the_memory_store_fails_its_job_saying_steps_need_postgres() -> None:
    # Given a handler that takes a durable step
    registry = Registry()
    registry.task("stepper", max_attempts=1)(lambda job: job.step("one", lambda: 1))
    store = MemoryStore(clock=lambda: T0)
    job_id = store.enqueue(registry.spec("stepper")).id

    # When a runner on the in-memory store runs it
    report = Runner(store, registry).tick()

    # Then the step is refused, clearly, and the job fails instead of pretending it stepped
    job = store.get(job_id)
    assert (report.claimed, job.status) == (1, Status.DEAD)
    assert job.error == "ConfigurationError: durable steps need the Postgres store"


def test_every_step_operation_of_the_memory_store_is_refused() -> None:
    store = MemoryStore(clock=lambda: T0)
    job = store.enqueue(registry_of("noop").spec("noop")).job
    assert job is not None
    token = job.id  # any token: nothing is looked up before the refusal

    refusals = [
        lambda: store.steps.load(job.id, token),
        lambda: store.steps.complete(job.id, token, "one", "1"),
        lambda: store.steps.suspend(job.id, token, kind=WaitKind.SUSPEND),
        lambda: store.steps.signal(job.id, "approve"),
        lambda: store.steps.show(job.id),
        lambda: store.steps.retry(job.id, fresh=True),
    ]

    for refused in refusals:
        with pytest.raises(ConfigurationError, match="durable steps need the Postgres store"):
            refused()
    assert store.get(job.id) == job


def test_enqueue_after_on_the_memory_store_is_refused_and_writes_nothing() -> None:
    store = MemoryStore(clock=lambda: T0)
    parent = store.enqueue(registry_of("noop").spec("noop")).id

    with pytest.raises(ConfigurationError, match="need the Postgres store"):
        store.enqueue_after(JobBatch.of([registry_of("noop").spec("noop")]), [[parent]])

    assert [j.id for j in store.list_jobs().jobs] == [parent]
    assert store.relatives(parent) == []


def test_group_stats_count_waiting_and_running_jobs_per_queue_and_group() -> None:
    # Given two jobs of group "a" (one then claimed), one of "b" and one succeeded job
    clock = [T0]
    store = MemoryStore(clock=lambda: clock[0])
    registry = registry_of("noop")
    for group in ("a", "a", "b", "c"):
        store.enqueue(registry.spec("noop", group=group))
    done = store.claim(limit=1)[0]
    assert done.group_key == "a"
    store.complete(done)
    store.claim(limit=1)  # the second "a" job: running
    clock[0] = T0 + timedelta(seconds=30)

    stats = store.group_stats()

    assert stats == [
        GroupStats("default", "a", 0, 1, None),
        GroupStats("default", "b", 1, 0, 30.0),
        GroupStats("default", "c", 1, 0, 30.0),
    ]
    assert store.group_stats_all_users() == stats
    assert store.stats_all_users() == store.stats()


def test_search_jobs_filters_by_part_of_the_error_and_by_group() -> None:
    store = MemoryStore(clock=lambda: T0)
    registry = registry_of("noop")
    for group in ("a", "b"):
        store.enqueue(registry.spec("noop", group=group, max_attempts=1))
    for job in store.claim(limit=2):
        store.finish([transitions.failed(job, f"Timeout in {job.group_key}", permanent=True)])

    found = store.search_jobs(JobFilter.of(error="TIMEOUT IN A").params())
    grouped = store.search_jobs(JobFilter.of(groups=["b"], statuses=["dead"]).params())

    assert [j.group_key for j in found.jobs] == ["a"]
    assert [j.group_key for j in grouped.jobs] == ["b"]
    assert store.search_jobs(JobFilter.of(statuses=["queued"]).params()).jobs == []


def test_the_memory_store_finds_a_claim_again_by_its_seed_as_postgres_does() -> None:
    # Given two jobs claimed under a seed, and one claimed after under another
    clock = [T0]
    store = MemoryStore(clock=lambda: clock[0])
    registry = registry_of("noop")
    for _ in range(3):
        store.enqueue(registry.spec("noop"))
    seed = bytes(range(16))
    lost = store.claim(limit=2, lease_seconds=30, seed=seed)
    other = store.claim(limit=1, lease_seconds=30)
    assert [job.lease_token for job in lost] == [
        transitions.lease_token(seed, job.id) for job in lost
    ]

    # When the seed looks for its jobs 20 seconds later
    clock[0] = T0 + timedelta(seconds=20)
    found = store.recover_claimed([seed], lease_seconds=30).jobs()

    # Then its two come back, same tokens and attempts, the lease renewed; the other stays
    assert [job.id for job in found] == [job.id for job in lost]
    assert [job.lease_token for job in found] == [job.lease_token for job in lost]
    assert [job.attempts for job in found] == [1, 1]
    assert [job.lease_until for job in found] == [T0 + timedelta(seconds=50)] * 2
    assert store.get(other[0].id) == other[0]
