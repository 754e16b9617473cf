"""The long-lived worker loop: batches back to back while there is work, a nap (or a wait
for an enqueue notification) when there is none, reclaim passes, and reconnects."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from .errors import DatabaseError
from .ports import Store
from .report import TickReport

log = logging.getLogger("tickq")


class Batches(Protocol):
    """What the loop drives: the Runner, seen from here."""

    store: Store
    batch_size: int

    @property
    def leased_ahead(self) -> bool: ...

    def reclaim(self, report: TickReport) -> None: ...

    def run_batch(
        self, report: TickReport, *, claim_next: Callable[[], bool], overlap: bool
    ) -> int: ...

    def jitter(self) -> float: ...

    def take_ended_parents(self) -> bool: ...


def work(
    runner: Batches,
    *,
    stop: threading.Event,
    poll_interval: float = 1.0,
    reclaim_interval: float = 5.0,
    on_tick: Callable[[TickReport], None] | None = None,
    reconnect: Callable[[], Store] | None = None,
    listen: bool = True,
) -> TickReport:
    """Run until `stop` is set (see Runner.work)."""
    total = TickReport()
    started = time.perf_counter()
    last_reclaim = 0.0
    delay = 0.5
    listening: Store | None = None
    # After a stop, the batch already leased by the last persist still runs.
    while not stop.is_set() or runner.leased_ahead:
        report = TickReport()
        try:
            if listen and listening is not runner.store:
                if runner.store.listen_for_jobs():
                    listening = runner.store
                else:
                    listen = False
                    log.warning(
                        "LISTEN does not reach this connection (a transaction or a "
                        "transaction-mode pooler); waking by polling every %g s",
                        poll_interval,
                    )
            if time.monotonic() - last_reclaim >= reclaim_interval:
                runner.reclaim(report)
                last_reclaim = time.monotonic()
            claimed = runner.run_batch(report, claim_next=lambda: not stop.is_set(), overlap=True)
        except DatabaseError as exc:
            if reconnect is None:
                raise
            log.warning("database error, reconnecting in %.1f s: %s", delay, exc)
            if stop.wait(delay):
                break
            delay = min(delay * 2, 30.0)
            _replace_store(runner, reconnect)
            continue
        delay = 0.5
        total.add(report)
        if on_tick is not None and (claimed or report.reclaimed):
            on_tick(report)
        # Ending a parent may have queued its children: claim again at once.
        if claimed < runner.batch_size and not runner.take_ended_parents():
            # Jitter keeps many idle workers from polling in lockstep.
            pause = poll_interval * runner.jitter()
            if listening is runner.store:
                _await_jobs(runner.store, stop, pause)
            else:
                stop.wait(pause)
    if listening is runner.store:
        with contextlib.suppress(DatabaseError):
            runner.store.unlisten_jobs()
    total.duration_seconds = time.perf_counter() - started
    return total


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


def _replace_store(runner: Batches, reconnect: Callable[[], Store]) -> None:
    try:
        fresh = reconnect()
    except DatabaseError as exc:
        log.warning("reconnect failed: %s", exc)
        return
    old, runner.store = runner.store, fresh
    with contextlib.suppress(Exception):
        old.close()
