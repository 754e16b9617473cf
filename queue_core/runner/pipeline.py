"""Pipelining: what the runner's loop needs to keep between batches so that one statement per
batch persists the last outcomes and leases the next jobs, and, while batches are quick,
runs on a database thread beside the handlers.

A busy worker so pays one round trip per batch, and the database and Python work at the
same time instead of taking turns. The loop itself, where the overlap happens, is
`Runner.run_batch` (queue_core/runner/runner.py); the state it carries (jobs leased ahead, outcomes
not yet saved, whether the last batch was quick) lives here and nowhere else.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from queue_core.model.jobs import TERMINAL, Job, Outcome
from queue_core.store.port import NO_JOBS, ClaimedBatch

_T = TypeVar("_T")

# A batch whose handlers took at most this long (and a tenth of the shortest lease in it)
# lets the pipeline lease the next batch before running the one after it.
QUICK_BATCH_SECONDS = 1.0
# ...and one whose parsing and handlers took at least this long pays for running the
# statement on the database thread: below it (no-op handlers, small batches), handing the
# statement to that thread and back costs more than the Python time it would hide.
OVERLAP_MIN_SECONDS = 0.001

Batch = tuple[list[Job], list[Outcome]]


class Pipeline:
    """The loop's state between batches, and the database thread the overlap runs on."""

    def __init__(self) -> None:
        self._database: ThreadPoolExecutor | None = None
        # Jobs leased by the last persist (finish and claim in one statement), run next.
        self.next: ClaimedBatch = NO_JOBS
        # A batch run but not yet persisted: the statement that runs beside the next batch
        # persists it. Only ever set while `next` holds that next batch.
        self.unsaved: Batch | None = None
        # Whether the last batch ran quickly enough to lease the next one before running it,
        # and slowly enough that doing so beside it pays for the thread hand-off.
        self.quick = False
        self.worth_overlap = False
        # Batches whose outcomes a failed statement did not persist (the connection died):
        # sent again, fenced by their lease tokens, first thing on the next connection.
        self.owed: list[Batch] = []
        # Seeds of claim statements that failed: a claim may have committed though its reply
        # was lost with the connection, and its seed finds those jobs again, first thing on
        # the next connection, to run at once (Store.recover_claimed).
        self.lost_claims: list[bytes] = []
        # Whether a persisted batch released jobs: it ended a job that has children
        # (dependencies, a map's child or parent), or suspended a map's parent with its
        # children enqueued. They may be queued now, so the loop claims again rather than
        # stop or sleep.
        self.released = False

    @property
    def leased_ahead(self) -> bool:
        """Jobs are leased but not yet run: the loop runs another batch before it stops
        (their outcomes, and the unsaved batch's, are persisted by it)."""
        return bool(self.next)

    @property
    def settled(self) -> bool:
        """Nothing leased ahead and nothing run but unsaved."""
        return not self.next and self.unsaved is None and not self.owes

    @property
    def owes(self) -> bool:
        """A failed statement left outcomes to send again or claims to find again."""
        return bool(self.owed or self.lost_claims)

    def failed(self, *batches: Batch | None, seed: bytes | None) -> None:
        """Keep what a failed statement carried for the next connection: the batches whose
        outcomes it was persisting, and the seed of the claim it made (if it claimed)."""
        self.owed += [batch for batch in batches if batch is not None]
        if seed is not None:
            self.lost_claims.append(seed)

    def take_released(self) -> bool:
        """Whether a batch persisted since the last call released jobs."""
        released, self.released = self.released, False
        return released

    def note_released(self, jobs: Sequence[Job], outcomes: Sequence[Outcome]) -> None:
        for job, outcome in zip(jobs, outcomes, strict=True):
            if outcome.spawned or (job.has_children and outcome.status in TERMINAL):
                self.released = True
                return

    def claims_ahead(self, size: int, batch_size: int, autocommit: bool) -> bool:
        """Lease the next batch before this one runs only when this one is full, the last
        one was quick but not so quick that the overlap costs more than it hides, and the
        store is autocommit: a job leased ahead waits for one batch before it starts, which
        must stay far inside its lease (and a Lambda tick's safety margin), and two threads'
        statements must not share a caller's transaction. Without the overlap, the statement
        after the batch still persists it and leases the next: one statement per batch.
        """
        return size == batch_size and self.quick and self.worth_overlap and autocommit

    def timed(self, elapsed: float, jobs: Sequence[Job], lease_seconds: int) -> None:
        """Remember how long a batch's parsing and handlers took, for `claims_ahead`."""
        shortest_lease = min(job.lease_seconds or lease_seconds for job in jobs)
        self.quick = elapsed <= min(QUICK_BATCH_SECONDS, shortest_lease / 10)
        self.worth_overlap = elapsed >= OVERLAP_MIN_SECONDS

    def in_background(
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

    def close(self) -> None:
        if self._database is not None:
            self._database.shutdown(wait=True)
            self._database = None
