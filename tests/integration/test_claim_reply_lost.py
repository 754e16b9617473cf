"""A claim that committed but whose reply was lost with the connection: the worker drew
the claim's seed and kept it while the statement was in flight, so on the next connection
it finds the jobs that claim leased and runs them at once, on the attempt the claim spent,
instead of leaving them running until their lease expires and reclaim spends another.

The claim commits for real; then the worker's backend is terminated before the worker
reads anything of the reply (the store below drops the reply and meets the dead
connection), as when PostgreSQL goes away between the commit and the reply."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import psycopg

from queue_core import Registry, Runner
from queue_core.model import validation
from queue_core.model.jobs import Outcome
from queue_core.postgres import PostgresStore
from queue_core.postgres.statements import QUERIES
from queue_core.runner.report import TickReport
from queue_core.store.port import ClaimedBatch
from tests.conftest import Connect
from tests.integration.test_runner_reconnect import attempts, enqueue, terminate


class ClaimReplyLost(PostgresStore):
    """A store whose first statement claiming jobs commits, and whose connection then dies
    before the reply is read: the caller gets the dead connection's error."""

    def __init__(self, conn: psycopg.Connection, admin: psycopg.Connection) -> None:
        super().__init__(conn)
        self._admin = admin
        self._conn = conn
        self.lost: list[UUID] = []  # the jobs the lost reply held

    def finish_and_claim_unparsed(
        self, outcomes: Sequence[Outcome], **options: Any
    ) -> tuple[set[UUID], ClaimedBatch]:
        held, claimed = super().finish_and_claim_unparsed(outcomes, **options)
        if self.lost or not claimed:
            return held, claimed
        self.lost = [job.id for job in claimed.jobs()]  # what the worker never sees
        terminate(self._admin, self._conn)
        return super().finish_and_claim_unparsed((), limit=0)  # the dead connection's error


class SecondClaimLost(ClaimReplyLost):
    """The first claim's reply arrives; the next statement that claims loses its reply."""

    def finish_and_claim_unparsed(
        self, outcomes: Sequence[Outcome], **options: Any
    ) -> tuple[set[UUID], ClaimedBatch]:
        if not outcomes and not self.lost:
            return PostgresStore.finish_and_claim_unparsed(self, outcomes, **options)
        return super().finish_and_claim_unparsed(outcomes, **options)


def tick(
    connect: Connect, lossy: type[ClaimReplyLost], count: int, batch_size: int
) -> tuple[ClaimReplyLost, TickReport, Counter[tuple[str, int]]]:
    """A tick that reconnects, over `count` jobs, each handler run counted: every job ran
    exactly once. Returns the store, the report and the jobs by status and attempts."""
    admin = connect()
    registry, calls = Registry(), Counter[UUID]()
    registry.task("work")(lambda job: calls.update([job.id]))
    ids = enqueue(admin, count)
    store = lossy(connect(), admin)
    with Runner(store, registry, batch_size=batch_size, concurrency=1) as runner:
        report = runner.tick(reconnect=lambda: PostgresStore(connect()))
        assert runner.pipeline.settled
    assert calls == Counter({job_id: 1 for job_id in ids})
    return store, report, attempts(admin)


def test_jobs_of_a_claim_whose_reply_was_lost_run_at_once_on_their_first_attempt(
    connect: Connect,
) -> None:
    # Given three jobs, and a worker whose first claim commits but whose reply is lost
    # When its tick reconnects (the jobs' leases hold for 30 s more)
    store, report, counts = tick(connect, ClaimReplyLost, 3, batch_size=3)

    # Then each job ran once, at once (the tick did not wait), on its first attempt
    assert len(store.lost) == 3
    assert counts == Counter({("succeeded", 1): 3})
    assert (report.succeeded, report.reclaimed) == (3, 0)


def test_jobs_of_a_finish_and_claim_whose_reply_was_lost_run_at_once_too(
    connect: Connect,
) -> None:
    """The second batch's statement finishes the first batch and claims the next: both
    commit, the reply is lost. The first batch's outcomes are sent again (fenced by their
    tokens, so they finish once) and the batch claimed is found by its seed."""
    store, report, counts = tick(connect, SecondClaimLost, 4, batch_size=2)

    assert len(store.lost) == 2
    assert counts == Counter({("succeeded", 1): 4})
    # The resent outcomes were written by the statement whose reply was lost: their tokens
    # are gone, so the report counts them as lost leases (it cannot tell that write from
    # another worker's).
    assert (report.succeeded, report.lost_leases, report.reclaimed) == (2, 2, 0)


def test_finding_a_claim_again_reads_the_running_jobs_alone(conn: psycopg.Connection) -> None:
    """The statement cannot look a token up (the index holds none): it reads the running
    jobs, few and indexed by jobs_lease_idx, never the backlog or the finished days."""
    # Given a backlog of 3,000 queued jobs beside 10 running ones
    store = PostgresStore(conn)
    store.enqueue_many([validation.job_spec("work", {}) for _ in range(3000)])
    seed = os.urandom(16)
    claimed = store.claim(limit=10, seed=seed)
    conn.execute("analyze tickq.jobs_live")

    # When the statement finding them again is planned and run (then rolled back)
    params = {"seeds": [seed], "lease_seconds": 30, "now": None}
    with conn.transaction(force_rollback=True):
        (plan,) = conn.execute(
            f"explain (analyze, format json) {QUERIES['jobs_claim_recover']}", params
        ).fetchone()[0]

    # Then it found the ten through the running jobs' index, reading no other row
    text = json.dumps(plan)
    assert plan["Plan"]["Actual Rows"] == len(claimed) == 10
    assert "jobs_lease_idx" in text and "Seq Scan" not in text, text[:2000]
    assert "jobs_done" not in text, text[:2000]
