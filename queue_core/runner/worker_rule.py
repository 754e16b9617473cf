"""The long-lived worker's stop rule for the runner's loop (`tickq work`): claim until a
signal; between batches, keep LISTEN up and reclaim expired leases now and then; when the
queue is empty, a nap (or a wait for an enqueue notification); after a database failure, a
reconnect."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from queue_core.errors import DatabaseError
from queue_core.runner.report import TickReport
from queue_core.store.port import Store

log = logging.getLogger("tickq")

# After a database failure, a reconnect is tried about this often (jittered by 20 %)...
RECONNECT_SECONDS = 0.25
# ...and never more often than this, however quickly the attempts fail.
RECONNECTS_PER_SECOND = 5


class Host(Protocol):
    """What the rule needs of the Runner whose loop it rules."""

    store: Store
    batch_size: int
    rand: Callable[[], float]

    def reclaim(self, report: TickReport) -> None: ...

    def jitter(self) -> float: ...


class WorkerRule:
    """Run until `stop` is set (see Runner.work); `total` sums every batch's report."""

    def __init__(
        self,
        runner: Host,
        *,
        stop: threading.Event,
        poll_interval: float,
        reclaim_interval: float,
        on_tick: Callable[[TickReport], None] | None,
        reconnect: Callable[[], Store] | None,
        listen: bool,
    ) -> None:
        self.runner = runner
        self.stop = stop
        self.poll_interval = poll_interval
        self.reclaim_interval = reclaim_interval
        self.on_tick = on_tick
        self.reconnect = reconnect
        self.listen = listen
        self.total = TickReport()
        self.report = TickReport()
        self.before_batch: Callable[[TickReport], None] | None = self._keep_up
        self.after_batch: Callable[[int, TickReport], None] | None = self._count
        self._listening: Store | None = None
        self._last_reclaim = 0.0

    def go_on(self) -> bool:
        return not self.stop.is_set()

    def _keep_up(self, report: TickReport) -> None:
        """LISTEN on the current connection, and a reclaim pass when one is due."""
        store = self.runner.store
        if self.listen and self._listening is not store:
            if store.listen_for_jobs():
                self._listening = store
            else:
                self.listen = False
                log.warning(
                    "LISTEN does not reach this connection (a transaction or a "
                    "transaction-mode pooler); waking by polling every %g s",
                    self.poll_interval,
                )
        if time.monotonic() - self._last_reclaim >= self.reclaim_interval:
            self.runner.reclaim(report)
            self._last_reclaim = time.monotonic()

    def _count(self, claimed: int, report: TickReport) -> None:
        self.total.add(report)
        self.report = TickReport()
        if self.on_tick is not None and (claimed or report.reclaimed):
            self.on_tick(report)

    def drained(self, claimed: int) -> bool:
        if claimed < self.runner.batch_size:
            # Jitter keeps many idle workers from polling in lockstep.
            pause = self.poll_interval * self.runner.jitter()
            if self._listening is self.runner.store:
                _await_jobs(self.runner.store, self.stop, pause)
            else:
                self.stop.wait(pause)
        return True

    def woken(self) -> bool:
        """Whether a job was enqueued since the last look (a notification came), without
        waiting: the streaming loop asks while handlers run and the queue was empty."""
        if self._listening is not self.runner.store:
            return False
        try:
            return self.runner.store.wait_for_jobs(0)
        except DatabaseError:
            return True  # the next statement meets the failure and handles it

    def failed(self, exc: DatabaseError) -> bool:
        if self.reconnect is None:
            raise exc
        return replace_store(self.runner, self.reconnect, exc, self.stop.wait)

    def close(self) -> None:
        self.total.add(self.report)  # what the loop did after its last batch (a resend)
        if self._listening is self.runner.store:
            with contextlib.suppress(DatabaseError):
                self.runner.store.unlisten_jobs()


def _await_jobs(store: Store, stop: threading.Event, seconds: float) -> None:
    """Sleep until a job is enqueued, `stop` is set or `seconds` pass; in slices, so a
    stop is noticed within a quarter second."""
    deadline = time.monotonic() + seconds
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            if store.wait_for_jobs(min(left, 0.25)):
                return
        except DatabaseError:
            return  # the next claim meets the same failure and handles it


def replace_store(
    runner: Host,
    reconnect: Callable[[], Store],
    error: DatabaseError,
    wait: Callable[[float], bool],
) -> bool:
    """After `error`, give `runner` a fresh store from `reconnect()`, tried every
    RECONNECT_SECONDS (jittered, so that many workers do not knock in step) until one works;
    False, leaving the store as it is, once `wait(seconds)` says to stop (returns True).

    A fixed short interval rather than a growing one: a database back from a restart
    finds the worker claiming within a fraction of a second, not after the rest of a long
    wait; the interval's floor caps the attempts at RECONNECTS_PER_SECOND.
    """
    log.warning("database error, reconnecting: %s", error)
    began = time.monotonic()
    attempts = 0
    while True:
        pause = max(1 / RECONNECTS_PER_SECOND, RECONNECT_SECONDS * (0.8 + 0.4 * runner.rand()))
        if wait(pause):
            return False
        attempts += 1
        try:
            fresh = reconnect()
        except DatabaseError as exc:
            if attempts == 1:
                log.warning("reconnect failed, trying every %g s: %s", RECONNECT_SECONDS, exc)
            continue
        break
    old, runner.store = runner.store, fresh
    with contextlib.suppress(Exception):
        old.close()
    log.warning("reconnected after %d attempts in %.1f s", attempts, time.monotonic() - began)
    return True
