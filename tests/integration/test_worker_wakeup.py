"""An idle long-running worker wakes on enqueue (LISTEN/NOTIFY) instead of its next poll."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg

from queue_core import PostgresStore, Registry, Runner

Connect = Callable[[], psycopg.Connection]
LONG_POLL = 60.0  # far longer than any wake-up: a job run before it proves the wake-up


def test_wait_for_jobs_returns_once_a_job_is_enqueued_elsewhere(
    conn: psycopg.Connection, connect: Connect
) -> None:
    # Given a store listening for enqueues, and nothing pending
    store = PostgresStore(conn)
    assert store.listen_for_jobs()
    assert not store.wait_for_jobs(0.0)

    # When another connection enqueues a job
    PostgresStore(connect()).enqueue(Registry().spec("noop"))

    # Then the wait ends at once, and the notification is consumed
    assert store.wait_for_jobs(LONG_POLL)
    assert not store.wait_for_jobs(0.0)


def test_listening_is_refused_inside_a_transaction(connect: Connect) -> None:
    # Given a connection that is not in autocommit mode
    tx_conn = connect()
    tx_conn.autocommit = False

    # When a store on it is asked to listen, then it declines and leaves no transaction open
    assert not PostgresStore(tx_conn).listen_for_jobs()
    assert tx_conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_an_idle_worker_runs_a_new_job_long_before_its_next_poll(
    conn: psycopg.Connection, connect: Connect
) -> None:
    # Given a worker idling with a poll interval far longer than the test
    registry = Registry()
    ran = threading.Event()

    @registry.task("wake")
    def wake(job: Any) -> None:
        ran.set()

    stop = threading.Event()
    store = _SignalsEmptyClaims(conn)
    runner = Runner(store, registry, rand=lambda: 1.0)
    worker = threading.Thread(
        target=runner.work, kwargs={"stop": stop, "poll_interval": LONG_POLL}, daemon=True
    )
    worker.start()
    try:
        # Once it is waiting (its first claim found nothing)
        assert store.came_back_empty.wait(LONG_POLL / 3)

        # When a job is enqueued from elsewhere
        PostgresStore(connect()).enqueue(registry.spec("wake"))

        # Then the handler runs well within the poll interval
        assert ran.wait(LONG_POLL / 3)
    finally:
        stop.set()
        worker.join(LONG_POLL)
    assert not worker.is_alive()


class _SignalsEmptyClaims(PostgresStore):
    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(conn)
        self.came_back_empty = threading.Event()

    def claim(self, **options: Any) -> list[Any]:
        jobs = super().claim(**options)
        if not jobs:
            self.came_back_empty.set()
        return jobs

    def finish_and_claim_unparsed(self, outcomes: Any, **options: Any) -> Any:
        held, claimed = super().finish_and_claim_unparsed(outcomes, **options)
        if options.get("limit") and not claimed:
            self.came_back_empty.set()
        return held, claimed
