"""The runner isolates a job whose outcome the database refuses: that job ends dead with
the reason, its batch-mates keep their own outcomes, and the tick goes on. Before, the
refused statement killed the tick and left every job of the batch running, to end
`lease expired` at the reclaim."""

from __future__ import annotations

from collections import Counter
from typing import Any

import psycopg
import pytest

from queue_core import JobContext, PostgresStore, Registry, RetryAfter, Runner
from queue_core.runner import pipeline as pipeline_module


@pytest.fixture
def store(conn: psycopg.Connection) -> PostgresStore:
    return PostgresStore(conn)


def rows(conn: psycopg.Connection) -> dict[int, tuple[str, str | None]]:
    return {
        n: (status, error)
        for n, status, error in conn.execute(
            "select (payload->>'n')::int, status, error from tickq.jobs"
        )
    }


def registry_with_a_poisoned_job(poisoned: set[int]) -> Registry:
    registry = Registry()

    @registry.task("work", max_attempts=1)
    def work(job: JobContext) -> Any:
        if job.payload["n"] in poisoned:
            # A snooze the database cannot store: now + 1e300 s is out of an interval's range.
            raise RetryAfter(1e300)
        return {"n": job.payload["n"]}

    return registry


@pytest.mark.parametrize("overlap", [False, True], ids=["one-statement", "overlapped"])
def test_a_refused_outcome_fails_its_job_and_nothing_else(
    store: PostgresStore,
    conn: psycopg.Connection,
    monkeypatch: pytest.MonkeyPatch,
    overlap: bool,
) -> None:
    if not overlap:  # every batch judged slow: none is leased ahead
        monkeypatch.setattr(pipeline_module, "QUICK_BATCH_SECONDS", 0.0)
    poisoned = {3, 27}
    registry = registry_with_a_poisoned_job(poisoned)
    store.enqueue_many([registry.spec("work", payload={"n": n}) for n in range(40)])

    with Runner(store, registry, batch_size=10, concurrency=1) as runner:
        report = runner.tick()

    found = rows(conn)
    assert {n for n, (status, _) in found.items() if status == "succeeded"} == (
        set(range(40)) - poisoned
    ), found
    for n in poisoned:
        status, error = found[n]
        assert status == "dead"
        assert error is not None and "could not be stored" in error and "queued" in error
    assert (report.claimed, report.succeeded, report.dead) == (40, 38, 2)
    assert report.lost_leases == 0
    # Nothing left running for the reclaim.
    assert Counter(status for status, _ in found.values()) == {"succeeded": 38, "dead": 2}
