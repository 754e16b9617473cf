"""The runner's drain and its pipelining, against the in-memory store: no database.

The same behaviour against PostgreSQL (real connections, real threads) is in
tests/integration/test_runner.py and test_runner_overlap.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from queue_core import Registry, Runner
from queue_core.model import transitions
from queue_core.model.jobs import Job, Outcome, Status
from queue_core.runner import pipeline as pipeline_module
from queue_core.runner.report import TickReport
from queue_core.store.memory import MemoryStore
from queue_core.store.port import Store

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def store_with(
    count: int, *, clock: Callable[[], datetime] = lambda: T0
) -> tuple[MemoryStore, Registry]:
    registry = Registry()
    registry.task("noop")(lambda job: None)
    store = MemoryStore(clock=clock)
    store.enqueue_many([registry.spec("noop", {"n": n}) for n in range(count)])
    return store, registry


def succeed(jobs: Sequence[Job]) -> list[Outcome]:
    return [transitions.succeeded(job) for job in jobs]


class Scripted(Runner):
    """A runner whose batches run through `run` instead of registered handlers."""

    def __init__(
        self, store: Store, batch_size: int, run: Callable[[Sequence[Job]], list[Outcome]]
    ) -> None:
        super().__init__(store, Registry(), batch_size=batch_size, concurrency=1)
        self._run = run

    def run_jobs(self, jobs: Sequence[Job]) -> list[Outcome]:
        return self._run(jobs)


def statuses(store: MemoryStore) -> dict[Status, int]:
    counts: dict[Status, int] = {}
    for job in store.list_jobs(limit=500).jobs:
        counts[job.status] = counts.get(job.status, 0) + 1
    return counts


def test_a_full_batch_persists_and_leases_the_next_in_one_call() -> None:
    store, _ = store_with(5)
    runner = Scripted(store, 2, succeed)

    ran = runner.run_batch(TickReport(), claim_next=lambda: True)

    assert ran == 2
    assert store.calls[-2:] == ["finish_and_claim(0, 2)", "finish_and_claim(2, 2)"]
    assert runner.leased_ahead
    assert statuses(store) == {Status.SUCCEEDED: 2, Status.RUNNING: 2, Status.QUEUED: 1}


def test_a_short_batch_persists_without_claiming() -> None:
    store, _ = store_with(1)
    runner = Scripted(store, 2, succeed)
    report = TickReport()

    runner.run_batch(report, claim_next=lambda: True)

    assert store.calls[-1] == "finish_and_claim(1, 0)"
    assert runner.pipeline.settled
    assert (report.batches, report.claimed, report.succeeded) == (1, 1, 1)


def drain_in_pairs(store: MemoryStore) -> tuple[Runner, TickReport, list[int]]:
    """The store's jobs in batches of two, overlapping wherever the pipeline chooses to; the
    running count each batch's handlers saw."""
    report = TickReport()
    running_during_handlers: list[int] = []

    def run(jobs: Sequence[Job]) -> list[Outcome]:
        running_during_handlers.append(statuses(store).get(Status.RUNNING, 0))
        return succeed(jobs)

    runner = Scripted(store, 2, run)
    runner.run_batch(report, claim_next=lambda: True, overlap=True)
    while runner.leased_ahead:
        runner.run_batch(report, claim_next=lambda: True, overlap=True)
    return runner, report, running_during_handlers


def test_quick_batches_lease_the_next_batch_while_handlers_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pipeline_module, "OVERLAP_MIN_SECONDS", 0.0)  # any batch pays
    store, _ = store_with(6)
    runner, report, running_during_handlers = drain_in_pairs(store)
    runner.close()

    # The first batch runs alone (nothing is known about its speed yet); from the second
    # on, the next batch is already leased while this one's handlers run.
    assert running_during_handlers == [2, 4, 2]
    assert statuses(store) == {Status.SUCCEEDED: 6}
    assert (report.batches, report.claimed, report.succeeded) == (3, 6, 6)
    assert runner.pipeline.settled


def test_batches_too_quick_to_pay_for_the_hand_off_run_their_statement_inline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Handing the statement to the database thread costs more than it hides when the
    batch in between takes less than OVERLAP_MIN_SECONDS: then the statement after each
    batch persists it and leases the next, still one statement per batch, no thread."""
    monkeypatch.setattr(pipeline_module, "OVERLAP_MIN_SECONDS", 60.0)  # no batch pays
    store, _ = store_with(6)
    runner, report, running_during_handlers = drain_in_pairs(store)

    assert running_during_handlers == [2, 2, 2]
    assert store.calls[-4:] == [
        "finish_and_claim(0, 2)",
        "finish_and_claim(2, 2)",
        "finish_and_claim(2, 2)",
        "finish_and_claim(2, 2)",
    ]
    assert runner.pipeline._database is None  # the database thread was never started
    assert (report.batches, report.succeeded) == (3, 6)
    assert runner.pipeline.settled


def test_a_store_inside_the_callers_transaction_never_leases_ahead() -> None:
    store, _ = store_with(6)
    store.autocommit = False  # type: ignore[misc]  # as a connection inside a transaction
    _, _, running_during_handlers = drain_in_pairs(store)

    assert running_during_handlers == [2, 2, 2]


def test_an_outcome_whose_lease_was_reclaimed_counts_as_a_lost_lease() -> None:
    now = [T0]
    store, _ = store_with(1, clock=lambda: now[0])
    report = TickReport()

    def outlive_the_lease(jobs: Sequence[Job]) -> list[Outcome]:
        now[0] += timedelta(seconds=31)
        store.reclaim()
        return succeed(jobs)

    Scripted(store, 1, outlive_the_lease).run_batch(report)

    assert (report.lost_leases, report.succeeded) == (1, 0)


def test_a_drain_runs_every_job_and_leaves_no_lease_behind() -> None:
    store, registry = store_with(7)

    with Runner(store, registry, batch_size=2, concurrency=1) as runner:
        report = runner.tick()

    assert statuses(store) == {Status.SUCCEEDED: 7}
    assert (report.claimed, report.succeeded, report.batches) == (7, 7, 4)
    assert runner.pipeline.settled


def test_a_drain_told_to_stop_still_runs_the_jobs_it_leased() -> None:
    store, registry = store_with(7)

    answers = iter([True, True])  # go on for the first batch and the lease after it only

    with Runner(store, registry, batch_size=2, concurrency=1) as runner:
        report = runner.tick(should_continue=lambda: next(answers, False))

    # The first batch's persist leased the second; that one runs before the tick returns.
    assert (report.claimed, report.succeeded, report.batches) == (4, 4, 2)
    assert statuses(store).get(Status.RUNNING, 0) == 0
    assert runner.pipeline.settled


def test_the_worker_loop_drains_then_stops_when_told() -> None:
    store, registry = store_with(5)
    stop = threading.Event()

    def stop_when_drained(report: TickReport) -> None:
        if not store.has_pending(["default"]):
            stop.set()

    with Runner(store, registry, batch_size=2, concurrency=1) as runner:
        total = runner.work(stop=stop, poll_interval=0.01, on_tick=stop_when_drained)

    assert total.succeeded == 5
    assert statuses(store) == {Status.SUCCEEDED: 5}
