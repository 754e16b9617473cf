"""A job is done when its handler ends, whatever its batch-mates do.

A batch's outcomes were saved together when its last handler returned: a quick job claimed
beside a slow one (which renewed its own lease) stayed `running` with its lease running
down; once it expired another worker's reclaim took it and ran it a second time, and the
first run's outcome was discarded ("lease lost"). Now the runner saves an ended job's
outcome within a tenth of a second while the others run (and, should the database refuse
that save, renews its lease until the batch's own persist).
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from queue_core import JobContext, PostgresStore, Registry, Runner, TickReport
from queue_core.model.validation import job_spec

LEASE = 2


def _tick(runner: Runner) -> TickReport:
    return runner.tick(max_batches=1)


def _one_batch(runner: Runner) -> TickReport:
    """The batch loop's own early save (Runner.run_batch, called directly)."""
    report = TickReport()
    runner.run_batch(report)
    return report


@pytest.mark.parametrize("run", [_tick, _one_batch], ids=["streaming", "batch"])
def test_a_quick_job_beside_a_slow_one_is_saved_at_once_and_never_run_twice(
    conn: psycopg.Connection, database_url: str, run: Any
) -> None:
    runs: list[str] = []
    quick_done = threading.Event()
    registry = Registry()

    @registry.task("quick", lease_seconds=LEASE)
    def quick(job: JobContext) -> Any:
        runs.append("quick")
        quick_done.set()
        return "quick"

    @registry.task("slow", lease_seconds=LEASE)
    def slow(job: JobContext) -> Any:
        runs.append("slow")
        assert quick_done.wait(30)
        with psycopg.connect(database_url, autocommit=True) as other:
            # The quick job's outcome is saved while this one still runs.
            saved = False
            for _ in range(150):
                job.heartbeat()
                row = other.execute("select status from tickq.jobs where type = 'quick'").fetchone()
                saved = row == ("succeeded",)
                if saved:
                    break
                threading.Event().wait(0.1)
            # Wait, renewing this job's own lease, until the quick job's first lease has
            # expired by the database's clock; then another worker's reclaim runs.
            expired = False
            while not expired:
                job.heartbeat()
                row = other.execute(
                    "select now() > created_at + make_interval(secs => %s * 1.5)"
                    " from tickq.jobs where type = 'quick'",
                    (LEASE,),
                ).fetchone()
                expired = bool(row and row[0])
                threading.Event().wait(0.2)
            reclaimed = PostgresStore(other).reclaim()
        return {"reclaimed": [str(j.id) for j in reclaimed], "saved_while_running": saved}

    store = PostgresStore(conn)
    store.enqueue_many([job_spec("slow"), job_spec("quick")])
    with Runner(store, registry, batch_size=2, concurrency=2, lease_seconds=LEASE) as runner:
        report = run(runner)

    assert report.claimed == 2
    rows = {
        type_: (status, attempts, result)
        for type_, status, attempts, result in conn.execute(
            "select type, status, attempts, result from tickq.jobs"
        )
    }
    assert rows["quick"] == ("succeeded", 1, "quick")
    assert rows["slow"] == ("succeeded", 1, {"reclaimed": [], "saved_while_running": True})
    assert sorted(runs) == ["quick", "slow"]
