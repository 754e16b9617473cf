"""Transactional completion: a job's success committed in the same transaction as the
handler's own writes, fenced by the job's lease token.

`complete_in(conn, job, result)` marks the running job (fenced: no row when the lease was
lost) and then finishes it through the one finish rule (jobs_finish_and_claim, claiming
nothing), both inside the caller's transaction, with the event its task opted into, so
the outbox row commits or rolls back with the success. A worker whose lease expired and
whose job was claimed again cannot commit: `complete_in` raises LeaseLost, and the
caller's writes roll back with it. `HandlerConnections` keeps the connections
transactional handlers of one runner run in: one per handler running at the same time,
opened on first use, kept between batches.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
from psycopg import pq

from queue_core.errors import ConfigurationError, HandlerConnectionLost, LeaseLost
from queue_core.model import transitions
from queue_core.model.events import event_statuses, with_opted_event
from queue_core.model.jobs import DEFAULT_LEASE_SECONDS, DEFAULT_QUEUE, Job, Outcome
from queue_core.postgres.claim import outcome_params
from queue_core.postgres.executor import Executor
from queue_core.store.port import CompletableJob

# How long a transactional handler waits between tries of a refused connection.
RETRY_CONNECT = timedelta(seconds=0.25)

Connect = Callable[[], psycopg.Connection[Any]]


def complete_in(
    conn: psycopg.Connection[Any],
    job: CompletableJob | Job,
    result: Any = None,
    *,
    events: Iterable[str] | None = None,
) -> Outcome:
    """Succeed the running `job` inside the open transaction of `conn`, fenced by its lease
    token: the success, and the `Job Succeeded` event when its task opted into it, commit
    or roll back with everything else the transaction wrote.

    A transactional handler's `job` knows its task's events; for a job claimed by hand,
    `events` names them as `@task(events=...)` does (none by default).

    Raises LeaseLost when another attempt holds the job (its lease expired and it was
    claimed again, or it finished): the caller must roll back. An autocommit connection
    outside a transaction is refused, as its completion would commit alone.
    """
    if not isinstance(conn, psycopg.Connection):
        raise ConfigurationError("complete_in needs a psycopg connection to the queue's database")
    if conn.autocommit and conn.info.transaction_status == pq.TransactionStatus.IDLE:
        raise ConfigurationError(
            "complete_in needs an open transaction (`with conn.transaction():`), else the "
            "job's success would commit without the writes it belongs with"
        )
    row = job if isinstance(job, Job) else job.row
    if row.lease_token is None:
        raise LeaseLost(row.id)
    if events is not None:
        opted = event_statuses(events)
    else:
        opted = frozenset() if isinstance(job, Job) else job.events
    outcome = transitions.succeeded(row, result)  # a result that is not JSON: refused here
    # The event rides on the outcome into the finish below, as on the runner's finish.
    outcome = with_opted_event(opted, row, outcome)
    marked = Executor(conn).rows(
        "job_complete_in_mark", {"id": row.id, "lease_token": row.lease_token}
    )
    if not marked:
        raise LeaseLost(row.id)
    # The mark holds the row's lock until the transaction ends: this finish holds too.
    if row.id not in _finish(conn, outcome):
        raise LeaseLost(row.id)
    stored = Outcome(row.id, row.lease_token, outcome.status, in_transaction=True)
    if not isinstance(job, Job):
        job.note_completed(stored)  # so the runner does not complete it a second time
    return stored


class HandlerConnections:
    """The connections a runner's transactional handlers run in: each handler running at a
    time holds one of its own for its transaction, so at most `concurrency` of them are
    open at once (besides the runner's own), kept between batches and closed with the
    runner. Autocommit outside the handler's `transaction()` block, and no session state,
    so a transaction-mode pooler may hand each transaction to any server session."""

    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        self._idle: list[psycopg.Connection[Any]] = []
        self._lock = threading.Lock()
        self.opened = 0  # connections opened so far, for tests and the docs' figures

    def run(self, job: CompletableJob, fn: Callable[..., Any]) -> Outcome:
        """`fn(job, conn)` and the job's fenced success in one transaction of a connection
        of its own; what `fn` raised (or LeaseLost) rolls both back and is raised again, but
        for a lost connection (HandlerConnectionLost): its commit may have happened."""
        held: list[psycopg.Connection[Any]] = []
        try:
            with self.transaction(until=job.row.lease_until) as conn:
                held.append(conn)
                result = fn(job, conn)
                done = job.completed  # the handler called complete_in itself
                if done is None:
                    done = complete_in(conn, job, result)
        except HandlerConnectionLost:
            raise
        except BaseException as exc:
            if held and held[0].broken:
                raise HandlerConnectionLost(f"the handler's connection was lost: {exc}") from exc
            raise
        return done

    @contextmanager
    def transaction(self, until: datetime | None = None) -> Iterator[psycopg.Connection[Any]]:
        """A connection inside a fresh transaction: committed when the block ends, rolled
        back when it raises. The connection goes back to the idle ones unless broken. While
        the database refuses connections, tried again every quarter second until `until`
        (the job's lease end), as the worker reconnects: its handler has not run yet."""
        conn, begun = self._begin(until)
        try:
            with begun:
                yield conn
        finally:
            self._give(conn)

    def _begin(
        self, until: datetime | None
    ) -> tuple[psycopg.Connection[Any], contextlib.ExitStack]:
        """A connection with its transaction begun. An idle one may have died since its last
        use (the server restarted, a pooler closed it) without knowing: one whose BEGIN
        fails is dropped for a fresh one, so a handler never fails, and its job never spends
        an attempt, for a connection that was dead before it ran."""
        while True:
            try:
                conn, kept = self._take()
            except psycopg.OperationalError as exc:
                if not _time_before(until):
                    raise HandlerConnectionLost(str(exc)) from exc
                continue
            begun = contextlib.ExitStack()
            try:
                begun.enter_context(conn.transaction())
            except psycopg.OperationalError as exc:
                with contextlib.suppress(psycopg.Error):
                    conn.close()
                if kept or _time_before(until):
                    continue
                raise HandlerConnectionLost(str(exc)) from exc
            return conn, begun

    def _take(self) -> tuple[psycopg.Connection[Any], bool]:
        """An idle connection (True) or a fresh one (False)."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        conn = self._connect()
        conn.autocommit = True
        with self._lock:
            self.opened += 1
        return conn, False

    def _give(self, conn: psycopg.Connection[Any]) -> None:
        healthy = (
            not conn.closed
            and not conn.broken
            and conn.info.transaction_status == pq.TransactionStatus.IDLE
        )
        if not healthy:
            with contextlib.suppress(psycopg.Error):
                conn.close()
            return
        with self._lock:
            self._idle.append(conn)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(psycopg.Error):
                conn.close()


def _time_before(until: datetime | None) -> bool:
    """Wait a quarter second before another try, if that still ends before `until`."""
    if until is None or datetime.now(UTC) + RETRY_CONNECT >= until:
        return False
    time.sleep(RETRY_CONNECT.total_seconds())
    return True


def sibling_connect(conn: psycopg.Connection[Any]) -> Connect:
    """Open connections like `conn` (same server, database, role and password, same
    prepared-statement setting): the default for transactional handlers."""
    info = conn.info
    threshold = conn.prepare_threshold

    def connect() -> psycopg.Connection[Any]:
        fresh = psycopg.connect(info.dsn, password=info.password, autocommit=True)
        fresh.prepare_threshold = threshold
        return fresh

    return connect


def _finish(conn: psycopg.Connection[Any], outcome: Outcome) -> set[UUID]:
    """The one finish rule (jobs_finish_and_claim, claiming nothing) for one outcome; the
    ids whose lease held."""
    params = {
        **outcome_params([outcome]),
        "queue": DEFAULT_QUEUE,
        "queues": [DEFAULT_QUEUE],
        "limit": 0,
        "lease_seconds": DEFAULT_LEASE_SECONDS,
        "now": None,
        "seed": None,
    }
    rows = Executor(conn).rows("jobs_finish_and_claim", params)
    return set(rows[0][0] or ())


class Handling:
    """The store's part for transactional handlers: connections like its own."""

    _db: Executor

    def handler_transactions(self) -> HandlerConnections:
        return HandlerConnections(sibling_connect(self._db.conn))
