"""Lease tokens: one per claim, never repeated, whichever claim statement leased the job.

Every claim derives each job's token from one random seed per lease and the job's id
(tickq.jobs_lease, queue_core/schema/functions/jobs_lease.sql): these tests hold the
fencing contract (a fresh token on every claim) to that derivation.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from queue_core import PostgresStore
from queue_core.model import transitions
from queue_core.model.validation import job_spec

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LEASE = 30
BATCH = 50


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize("queues", [("default",), ("default", "other")])
def test_every_job_of_a_batch_gets_a_token_of_its_own(
    conn: psycopg.Connection, queues: tuple[str, ...]
) -> None:
    store = PostgresStore(conn)
    for i in range(BATCH):
        store.enqueue(job_spec("t", {"i": i}, queue=queues[i % len(queues)]), now=at(0))

    jobs = store.claim(queues=queues, limit=BATCH, lease_seconds=LEASE, now=at(0))

    tokens = [job.lease_token for job in jobs]
    assert len(jobs) == BATCH
    assert None not in tokens
    assert len(set(tokens)) == BATCH, f"repeated tokens in one batch: {tokens}"


@pytest.mark.parametrize("queues", [("default",), ("default", "other")])
def test_a_job_leased_again_and_again_never_gets_a_token_it_had_before(
    conn: psycopg.Connection, queues: tuple[str, ...]
) -> None:
    # Given one job whose lease expires and is claimed again, many times over
    store = PostgresStore(conn)
    store.enqueue(job_spec("t", max_attempts=25), now=at(0))
    seen = []
    now = at(0)
    for _ in range(20):
        (job,) = store.claim(queues=queues, lease_seconds=LEASE, now=now)
        seen.append(job.lease_token)
        now += timedelta(seconds=LEASE)
        (reclaimed,) = store.reclaim(now=now)
        now = max(now, reclaimed.run_after)

    # Then every claim leased it under a new token, so no earlier holder can finish it
    assert len(set(seen)) == len(seen), f"a token came back: {seen}"


def test_a_token_is_good_for_its_own_job_only(conn: psycopg.Connection) -> None:
    # Given two jobs leased in one batch
    store = PostgresStore(conn)
    for i in range(2):
        store.enqueue(job_spec("t", {"i": i}), now=at(0))
    first, second = store.claim(limit=2, lease_seconds=LEASE, now=at(0))

    # When a worker presents the first job's token for the second job
    forged = replace(second, lease_token=first.lease_token)
    held = store.finish([transitions.succeeded(forged, "forged")], now=at(1))

    # Then nothing changes: the second job is still running under its own lease
    assert held == set()
    assert store.get(second.id) == second
