"""Pipelining: one statement per batch persists the last outcomes and leases the next jobs,
and while batches are quick it runs on a database thread beside the handlers.

A busy worker so pays one round trip per batch, and the database and Python work at the
same time instead of taking turns. The state this needs (jobs leased ahead, outcomes not yet
saved, whether the last batch was quick) lives here and nowhere else.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .jobs import TERMINAL, Job, Outcome
from .ports import NO_JOBS, ClaimedBatch, JobList, Store
from .report import TickReport

_T = TypeVar("_T")

# A batch whose handlers took at most this long (and a tenth of the shortest lease in it)
# lets the pipeline lease the next batch before running the one after it.
QUICK_BATCH_SECONDS = 1.0
# ...and one whose parsing and handlers took at least this long pays for running the
# statement on the database thread: below it (no-op handlers, small batches), handing the
# statement to that thread and back costs more than the Python time it would hide.
OVERLAP_MIN_SECONDS = 0.001

RunJobs = Callable[[Sequence[Job]], list[Outcome]]


class Pipeline:
    """Claims, runs (through the caller's `run`) and persists batches on one store."""

    def __init__(
        self, store: Store, *, queues: list[str], batch_size: int, lease_seconds: int
    ) -> None:
        self.store = store
        self.queues = queues
        self.batch_size = batch_size
        self.lease_seconds = lease_seconds
        self._database: ThreadPoolExecutor | None = None
        # Jobs leased by the last persist (finish and claim in one statement), run next.
        self._next: ClaimedBatch = NO_JOBS
        # A batch run but not yet persisted: the statement that runs beside the next batch
        # persists it. Only ever set while `_next` holds that next batch.
        self._unsaved: tuple[list[Job], list[Outcome]] | None = None
        # Whether the last batch ran quickly enough to lease the next one before running it,
        # and slowly enough that doing so beside it pays for the thread hand-off.
        self._quick = False
        self._worth_overlap = False
        # Whether a persisted batch ended a job that has children (dependencies): they may
        # be queued now, so the caller should claim again rather than stop or sleep.
        self._ended_parents = False

    @property
    def leased_ahead(self) -> bool:
        """Jobs are leased but not yet run: the caller must run another batch before it
        stops (their outcomes, and the unsaved batch's, are persisted by it)."""
        return bool(self._next)

    @property
    def settled(self) -> bool:
        """Nothing leased ahead and nothing run but unsaved."""
        return not self._next and self._unsaved is None

    def take_ended_parents(self) -> bool:
        """Whether a batch persisted since the last call ended a job that has children."""
        ended, self._ended_parents = self._ended_parents, False
        return ended

    def close(self) -> None:
        if self._database is not None:
            self._database.shutdown(wait=True)
            self._database = None

    def run_batch(
        self,
        report: TickReport,
        run: RunJobs,
        *,
        claim_next: Callable[[], bool] = lambda: False,
        overlap: bool = False,
    ) -> int:
        """Run one batch: the one leased ahead by the last persist, else a fresh claim.

        Persisting its outcomes also claims the next batch in the same statement when the
        batch was full and `claim_next()` allows it (see `leased_ahead`).

        With `overlap`, while batches are quick (see `_claims_ahead`), that statement goes
        out on the database thread *before* this batch is parsed and run: it persists the
        previous batch's outcomes and leases the next batch while this one's rows are turned
        into Jobs and its handlers run. Still one statement per batch; this batch's outcomes
        ride on the next batch's statement.
        """
        claimed, self._next = self._next, NO_JOBS
        unsaved, self._unsaved = self._unsaved, None
        if not claimed:
            claimed = JobList(
                self.store.claim(
                    queues=self.queues, limit=self.batch_size, lease_seconds=self.lease_seconds
                )
            )
        if not claimed:
            return 0
        report.batches += 1
        report.claimed += len(claimed)
        ahead = overlap and self._claims_ahead(len(claimed)) and claim_next()
        in_flight = None
        if ahead or unsaved is not None:
            in_flight = self._in_background(
                self.store.finish_and_claim_unparsed,
                unsaved[1] if unsaved is not None else (),
                queues=self.queues,
                limit=self.batch_size if ahead else 0,
                lease_seconds=self.lease_seconds,
            )
        started = time.monotonic()
        try:
            jobs = claimed.jobs()
            outcomes = run(jobs)
        finally:
            if in_flight is not None:  # never leave a statement running on the connection
                concurrent.futures.wait([in_flight])
        elapsed = time.monotonic() - started
        self._quick = elapsed <= self._quick_seconds(jobs)
        self._worth_overlap = elapsed >= OVERLAP_MIN_SECONDS
        if in_flight is not None:
            held, self._next = in_flight.result()
            if unsaved is not None:
                report.record(*unsaved, held)
                self._note_parents(*unsaved)
        if self._next:
            self._unsaved = (jobs, outcomes)
            return len(jobs)
        more = len(jobs) == self.batch_size and not ahead and claim_next()
        held, self._next = self.store.finish_and_claim_unparsed(
            outcomes,
            queues=self.queues,
            limit=self.batch_size if more else 0,
            lease_seconds=self.lease_seconds,
        )
        report.record(jobs, outcomes, held)
        self._note_parents(jobs, outcomes)
        return len(jobs)

    def _note_parents(self, jobs: Sequence[Job], outcomes: Sequence[Outcome]) -> None:
        for job, outcome in zip(jobs, outcomes, strict=True):
            if job.has_children and outcome.status in TERMINAL:
                self._ended_parents = True
                return

    def _claims_ahead(self, size: int) -> bool:
        """Lease the next batch before this one runs only when this one is full, the last
        one was quick but not so quick that the overlap costs more than it hides, and the
        store is autocommit: a job leased ahead waits for one batch before it starts, which
        must stay far inside its lease (and a Lambda tick's safety margin), and two threads'
        statements must not share a caller's transaction. Without the overlap, the statement
        after the batch still persists it and leases the next: one statement per batch.
        """
        return (
            size == self.batch_size
            and self._quick
            and self._worth_overlap
            and self.store.autocommit
        )

    def _quick_seconds(self, jobs: Sequence[Job]) -> float:
        shortest_lease = min(job.lease_seconds or self.lease_seconds for job in jobs)
        return min(QUICK_BATCH_SECONDS, shortest_lease / 10)

    def _in_background(
        self, fn: Callable[..., _T], *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[_T]:
        """Run `fn` on the database thread, returning once that thread has started it.

        Without the wait, this thread would go on running Python and keep the GIL for up to
        the interpreter's switch interval (5 ms), while the database thread still needs it
        to send the statement: the two would take turns after all.
        """
        if self._database is None:
            self._database = ThreadPoolExecutor(1, thread_name_prefix="tickq-db")
        started = threading.Event()

        def run() -> _T:
            started.set()
            return fn(*args, **kwargs)

        future = self._database.submit(run)
        started.wait()
        return future
