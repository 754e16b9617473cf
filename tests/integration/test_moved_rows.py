"""Statements racing a transaction that moves their job to another partition.

tickq.jobs keeps live and finished jobs in different partitions, so finishing, cancelling or
retrying a job moves its row. A statement that waited for that row fails with SQLSTATE 40001
instead of re-reading it; the store runs it again (queue_core/postgres/executor.py), and the caller
hears what it would have heard with the row in place. Each test holds the moving transaction
open until the racing statement is seen waiting for its lock, then commits it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from queue_core import InvalidTransition, LeaseLost, PostgresStore, Status
from queue_core.errors import DatabaseError
from queue_core.model.validation import job_spec

Connect = Callable[[], psycopg.Connection]
T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
LEASE = 30


def waiting_for_locks(observer: psycopg.Connection) -> int:
    row = observer.execute(
        "select count(*) from pg_stat_activity"
        " where datname = current_database() and wait_event_type = 'Lock'"
        "   and pid <> pg_backend_pid()"
    ).fetchone()
    assert row is not None
    return int(row[0])


def race(
    connect: Connect, move: Callable[[PostgresStore], Any], racer: Callable[[], Any]
) -> Future[Any]:
    """Run `move` in an open transaction, start `racer` on another connection, wait until it
    waits for the moved row's lock, then commit: the racer's future, settled."""
    mover = connect()
    mover.autocommit = False
    observer = connect()
    with ThreadPoolExecutor(1) as pool:
        move(PostgresStore(mover))
        future = pool.submit(racer)
        deadline = time.monotonic() + 30
        while waiting_for_locks(observer) < 1:
            assert not future.done(), f"the racer did not wait for the row: {future.result()}"
            assert time.monotonic() < deadline, "timed out waiting for the racer to block"
            time.sleep(0.01)
        mover.commit()
        future.exception(timeout=30)
    return future


def test_a_finish_behind_a_reclaim_that_kills_the_job_hears_its_lease_is_lost(
    connect: Connect,
) -> None:
    # Given a running job on its last attempt, and a reclaim killing it (moving it to the
    # finished partitions) in an open transaction
    setup = PostgresStore(connect())
    setup.enqueue(job_spec("t", max_attempts=1), now=T0)
    (job,) = setup.claim(lease_seconds=LEASE, now=T0)
    worker = PostgresStore(connect())

    # When the late worker finishes it meanwhile
    finish = race(
        connect,
        lambda s: s.reclaim(now=T0 + timedelta(seconds=LEASE + 1)),
        lambda: worker.complete(job, {"late": True}, now=T0 + timedelta(seconds=LEASE + 2)),
    )

    # Then it hears that its lease is lost (not a database error), and the job stays dead
    assert isinstance(finish.exception(), LeaseLost), finish.exception()
    assert setup.get(job.id).status == Status.DEAD


def test_a_cancel_behind_a_finish_hears_the_job_already_finished(connect: Connect) -> None:
    setup = PostgresStore(connect())
    setup.enqueue(job_spec("t"), now=T0)
    (job,) = setup.claim(lease_seconds=LEASE, now=T0)
    user = PostgresStore(connect())

    cancel = race(
        connect,
        lambda s: s.complete(job, {"ok": True}, now=T0 + timedelta(seconds=1)),
        lambda: user.cancel(job.id, now=T0 + timedelta(seconds=2)),
    )

    error = cancel.exception()
    assert isinstance(error, InvalidTransition), error
    assert setup.get(job.id).status == Status.SUCCEEDED


def test_a_heartbeat_behind_a_reclaim_that_kills_the_job_hears_its_lease_is_lost(
    connect: Connect,
) -> None:
    # Given a running job whose lease expired and a reclaim killing it, open
    setup = PostgresStore(connect())
    setup.enqueue(job_spec("t", max_attempts=1), now=T0)
    (job,) = setup.claim(lease_seconds=LEASE, now=T0)
    assert job.lease_token is not None
    worker = PostgresStore(connect())

    beat = race(
        connect,
        lambda s: s.reclaim(now=T0 + timedelta(seconds=LEASE + 1)),
        lambda: worker.extend_lease(
            job.id, job.lease_token, LEASE, now=T0 + timedelta(seconds=LEASE + 2)
        ),
    )

    assert isinstance(beat.exception(), LeaseLost), beat.exception()


def test_inside_the_callers_transaction_the_store_does_not_retry(connect: Connect) -> None:
    # The caller's earlier statements went with the failed one: only the caller may retry.
    setup = PostgresStore(connect())
    setup.enqueue(job_spec("t"), now=T0)
    (job,) = setup.claim(lease_seconds=LEASE, now=T0)
    callers = connect()
    callers.autocommit = False
    user = PostgresStore(callers)

    cancel = race(
        connect,
        lambda s: s.complete(job, {"ok": True}, now=T0 + timedelta(seconds=1)),
        lambda: user.cancel(job.id, now=T0 + timedelta(seconds=2)),
    )

    error = cancel.exception()
    assert isinstance(error, DatabaseError) and "safe to retry" in str(error), error
    callers.rollback()
    with pytest.raises(InvalidTransition):
        user.cancel(job.id)
