"""The tick runner: reclaim expired leases, then claim → run → persist batches."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from . import transitions
from .context import AsyncJobContext, JobContext
from .errors import DatabaseError, InvalidJob, JobCancelled, LeaseLost, PermanentError, RetryAfter
from .jobs import DEFAULT_LEASE_SECONDS, DEFAULT_QUEUE, Job, Outcome, Status
from .registry import Registry, Task
from .step_context import StepCounts, StepHost, Suspended
from .steps import suspended
from .store import Claimed, PostgresStore

log = logging.getLogger("tickq")
_T = TypeVar("_T")

# A batch whose handlers took at most this long (and a tenth of the shortest lease in it)
# lets the runner lease the next batch before running the one after it.
QUICK_BATCH_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A job that went dead during a tick, for alerts (EventBridge, logs)."""

    id: UUID
    type: str
    queue: str
    attempts: int
    error: str | None


# What a TickReport counts: summed across ticks and published as metrics.
TICK_COUNTERS = (
    "claimed",
    "succeeded",
    "retried",
    "dead",
    "snoozed",
    "cancelled",
    "lost_leases",
    "reclaimed",
    "batches",
    "steps",
    "suspended",
    "resumed",
)


@dataclass(slots=True)
class TickReport:
    claimed: int = 0
    succeeded: int = 0
    retried: int = 0
    dead: int = 0
    snoozed: int = 0
    cancelled: int = 0
    lost_leases: int = 0
    reclaimed: int = 0
    batches: int = 0
    steps: int = 0  # durable steps stored
    suspended: int = 0  # jobs that left their worker (suspend, sleep, wait_for)
    resumed: int = 0  # suspended jobs whose steps loaded again
    duration_seconds: float = 0.0
    dead_letters: list[DeadLetter] = field(default_factory=list)

    def add(self, other: TickReport) -> None:
        for name in TICK_COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.duration_seconds += other.duration_seconds
        self.dead_letters.extend(other.dead_letters)

    def as_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__ if name != "dead_letters"}
        out["dead_letters"] = [
            {
                "id": str(d.id),
                "type": d.type,
                "queue": d.queue,
                "attempts": d.attempts,
                "error": d.error,
            }
            for d in self.dead_letters
        ]
        return out


_COUNTER = {
    Status.SUCCEEDED: "succeeded",
    Status.RETRYING: "retried",
    Status.DEAD: "dead",
    Status.QUEUED: "snoozed",
    Status.CANCELLED: "cancelled",
}


class Runner:
    """Runs handlers for claimed jobs. Claims and persists are short statements; handlers run
    outside any transaction, at most `concurrency` at a time."""

    def __init__(
        self,
        store: PostgresStore,
        registry: Registry,
        *,
        queues: Sequence[str] = (DEFAULT_QUEUE,),
        batch_size: int = 10,
        concurrency: int = 10,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        rand: Callable[[], float] = random.random,
        time_left: Callable[[], float] | None = None,
    ) -> None:
        """`time_left()`: seconds until the invocation ends (a Lambda's remaining time less
        its margin); handlers' steps suspend before a step that would not fit."""
        if batch_size < 1 or concurrency < 1 or lease_seconds < 1:
            raise ValueError("batch_size, concurrency and lease_seconds must be positive")
        self.store = store
        self.registry = registry
        self.queues = list(queues)
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.rand = rand
        self._pool: ThreadPoolExecutor | None = None
        self._database: ThreadPoolExecutor | None = None
        # Jobs leased by the last persist (finish and claim in one statement), run next.
        self._next = Claimed([])
        # A batch run but not yet persisted: the statement that runs beside the next batch
        # persists it. Only ever set while `_next` holds that next batch.
        self._unsaved: tuple[list[Job], list[Outcome]] | None = None
        # Whether the last batch ran quickly enough to lease the next one before running it.
        self._quick = False
        self.step_counts = StepCounts()
        self._steps = StepHost(lambda: self.store, time_left, self.step_counts)

    def close(self) -> None:
        for pool in (self._pool, self._database):
            if pool is not None:
                pool.shutdown(wait=True)
        self._pool = self._database = None

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # One tick

    def tick(
        self,
        *,
        should_continue: Callable[[], bool] = lambda: True,
        max_batches: int | None = None,
        after_batch: Callable[[int], None] | None = None,
    ) -> TickReport:
        """Reclaim, then run batches until the queue is drained, `should_continue()` says
        stop, or `max_batches` ran. `after_batch(claimed)` runs after each batch."""
        started = time.perf_counter()
        report = TickReport()
        self.reclaim(report)

        def claim_next() -> bool:
            return should_continue() and (max_batches is None or report.batches < max_batches)

        if claim_next():
            while True:
                claimed = self.run_batch(report, claim_next=claim_next, overlap=True)
                if after_batch is not None:
                    after_batch(claimed)
                if not self._next:
                    break
        report.duration_seconds = time.perf_counter() - started
        return report

    def reclaim(self, report: TickReport) -> None:
        for job in self.store.reclaim():
            report.reclaimed += 1
            log.warning(
                "lease expired",
                extra={
                    "job_id": str(job.id),
                    "job_type": job.type,
                    "attempt": job.attempts,
                    "status": job.status.value,
                },
            )
            if job.status == Status.DEAD:
                report.dead += 1
                report.dead_letters.append(_dead_letter(job, job.error))

    def run_batch(
        self,
        report: TickReport,
        *,
        claim_next: Callable[[], bool] = lambda: False,
        overlap: bool = False,
    ) -> int:
        """Run one batch: the one prefetched by the last persist, else a fresh claim.

        With `claim_next`, persisting the outcomes also claims the next batch in the same
        statement when the batch was full and `claim_next()` allows it; the caller must then
        run `self._next` (jobs leased but not yet run) before it stops, as tick() and
        work() do.

        With `overlap`, while batches are quick (see `_claims_ahead`), that statement goes
        out on a background thread *before* this batch is parsed and run: it persists the
        previous batch's outcomes and leases the next batch while this one's rows are turned
        into Jobs and its handlers run, so the database and Python work at the same time
        instead of taking turns. Still one statement per batch; this batch's outcomes ride
        on the next batch's statement.
        """
        claimed, self._next = self._next, Claimed([])
        unsaved, self._unsaved = self._unsaved, None
        if not claimed:
            claimed = Claimed(
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
            outcomes = self.run_jobs(jobs)
            self._count_steps(report)
        finally:
            if in_flight is not None:  # never leave a statement running on the connection
                concurrent.futures.wait([in_flight])
        self._quick = time.monotonic() - started <= self._quick_seconds(jobs)
        if in_flight is not None:
            held, self._next = in_flight.result()
            if unsaved is not None:
                self._account(report, *unsaved, held)
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
        self._account(report, jobs, outcomes, held)
        return len(jobs)

    def _count_steps(self, report: TickReport) -> None:
        steps, suspends, resumes = self.step_counts.take()
        report.steps += steps
        report.suspended += suspends
        report.resumed += resumes

    def _claims_ahead(self, size: int) -> bool:
        """Lease the next batch before this one runs only when this one is full, the last
        one was quick, and the connection is autocommit: a job leased ahead waits for one
        batch before it starts, which must stay far inside its lease (and a Lambda tick's
        safety margin), and two threads' statements must not share a caller's transaction.
        """
        return size == self.batch_size and self._quick and self.store.conn.autocommit

    def _quick_seconds(self, jobs: Sequence[Job]) -> float:
        shortest_lease = min(job.lease_seconds or self.lease_seconds for job in jobs)
        return min(QUICK_BATCH_SECONDS, shortest_lease / 10)

    def _account(
        self, report: TickReport, jobs: Sequence[Job], outcomes: Sequence[Outcome], held: set[UUID]
    ) -> None:
        all_held = len(held) == len(outcomes)  # held ids are a subset of the outcomes' ids
        for job, outcome in zip(jobs, outcomes, strict=True):
            if outcome.suspended:  # stored when it happened, counted in `suspended`
                continue
            if not all_held and outcome.job_id not in held:
                report.lost_leases += 1
                log.warning("lease lost; outcome discarded", extra=_log_extra(job, outcome))
                continue
            name = _COUNTER[outcome.status]
            setattr(report, name, getattr(report, name) + 1)
            if outcome.status == Status.DEAD:
                report.dead_letters.append(_dead_letter(job, outcome.error))

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

    # Running handlers

    def run_jobs(self, jobs: Sequence[Job]) -> list[Outcome]:
        tasks = [self.registry.get(job.type) for job in jobs]
        outcomes: list[Outcome | None] = [None] * len(jobs)
        sync = [i for i, t in enumerate(tasks) if t is None or not t.is_async]
        async_ = [i for i, t in enumerate(tasks) if t is not None and t.is_async]
        futures = []
        if len(sync) == 1 or self.concurrency == 1:
            for i in sync:
                outcomes[i] = self.run_one(jobs[i], tasks[i])
        elif sync:
            pool = self._executor()
            futures = [(i, pool.submit(self.run_one, jobs[i], tasks[i])) for i in sync]
        if async_:
            for i, outcome in zip(async_, self._run_async([jobs[i] for i in async_]), strict=True):
                outcomes[i] = outcome
        for i, future in futures:
            outcomes[i] = future.result()
        return [o for o in outcomes if o is not None]

    def run_one(self, job: Job, task: Task | None) -> Outcome:
        if task is None:
            known = ", ".join(self.registry.names()) or "none"
            return transitions.failed(
                job,
                f"no handler registered for type {job.type!r} (known: {known})",
                rand=self.rand(),
            )
        context = JobContext(job, self.store, self.lease_seconds, self._steps, task.step_seconds)
        try:
            result = task.fn(context)
        except BaseException as exc:  # judged below; interrupts are re-raised there
            return self._judge(job, exc)
        return self._succeeded(job, result)

    def _run_async(self, jobs: Sequence[Job]) -> list[Outcome]:
        async def run_all() -> list[Outcome]:
            limit = asyncio.Semaphore(self.concurrency)

            async def run(job: Job) -> Outcome:
                task = self.registry.get(job.type)
                assert task is not None
                async with limit:
                    context = AsyncJobContext(
                        job, self.store, self.lease_seconds, self._steps, task.step_seconds
                    )
                    try:
                        result = await task.fn(context)
                    except BaseException as exc:
                        return self._judge(job, exc)
                    return self._succeeded(job, result)

            return list(await asyncio.gather(*(run(job) for job in jobs)))

        return asyncio.run(run_all())

    def _succeeded(self, job: Job, result: Any) -> Outcome:
        try:
            outcome = transitions.succeeded(job, result)
        except InvalidJob as exc:
            return transitions.failed(job, f"the handler's {exc}", rand=self.rand())
        if log.isEnabledFor(logging.INFO):  # the extra dict costs more than a no-op job
            log.info("job succeeded", extra=_log_extra(job, outcome))
        return outcome

    def _judge(self, job: Job, exc: BaseException) -> Outcome:
        if isinstance(exc, Suspended):
            return suspended(job)
        if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit):
            raise exc
        if isinstance(exc, RetryAfter):
            outcome = transitions.snoozed(job, exc.seconds)
        elif isinstance(exc, JobCancelled):
            outcome = transitions.cancelled_while_running(job)
        elif isinstance(exc, LeaseLost):
            outcome = transitions.failed(job, str(exc), rand=self.rand())
        else:
            error = f"{type(exc).__name__}: {exc}"
            outcome = transitions.failed(
                job, error, permanent=isinstance(exc, PermanentError), rand=self.rand()
            )
        log.log(
            logging.ERROR if outcome.status == Status.DEAD else logging.WARNING,
            "job %s",
            outcome.status.value,
            extra=_log_extra(job, outcome),
        )
        return outcome

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="tickq-job")
        return self._pool

    # The long-running worker

    def work(
        self,
        *,
        stop: threading.Event,
        poll_interval: float = 1.0,
        reclaim_interval: float = 5.0,
        on_tick: Callable[[TickReport], None] | None = None,
        reconnect: Callable[[], PostgresStore] | None = None,
        listen: bool = True,
    ) -> TickReport:
        """Run until `stop` is set: batches back to back while there is work, a short sleep
        when the queue is empty, and a reclaim pass every `reclaim_interval` seconds.

        With `listen`, an idle worker also wakes as soon as a job is enqueued (LISTEN/NOTIFY
        on its own autocommit connection); polling stays the fallback for delayed jobs.

        With `reconnect`, a database failure (restart, dropped connection) is survived: the
        worker waits with backoff and carries on with a fresh store. Outcomes of the batch
        in flight are lost with the connection; their leases expire and reclaim retries them.
        """
        total = TickReport()
        started = time.perf_counter()
        last_reclaim = 0.0
        delay = 0.5
        listening: PostgresStore | None = None
        # After a stop, the batch already leased by the last persist still runs.
        while not stop.is_set() or self._next:
            report = TickReport()
            try:
                if listen and listening is not self.store and self.store.listen_for_jobs():
                    listening = self.store
                if time.monotonic() - last_reclaim >= reclaim_interval:
                    self.reclaim(report)
                    last_reclaim = time.monotonic()
                claimed = self.run_batch(report, claim_next=lambda: not stop.is_set(), overlap=True)
            except DatabaseError as exc:
                if reconnect is None:
                    raise
                log.warning("database error, reconnecting in %.1f s: %s", delay, exc)
                if stop.wait(delay):
                    break
                delay = min(delay * 2, 30.0)
                self._replace_store(reconnect)
                continue
            delay = 0.5
            total.add(report)
            if on_tick is not None and (claimed or report.reclaimed):
                on_tick(report)
            if claimed < self.batch_size:
                # Jitter keeps many idle workers from polling in lockstep.
                pause = poll_interval * (0.5 + self.rand() / 2)
                if listening is self.store:
                    self._await_jobs(stop, pause)
                else:
                    stop.wait(pause)
        if listening is self.store:
            with contextlib.suppress(DatabaseError):
                self.store.unlisten_jobs()
        total.duration_seconds = time.perf_counter() - started
        return total

    def _await_jobs(self, stop: threading.Event, seconds: float) -> None:
        """Sleep until a job is enqueued, `stop` is set or `seconds` pass; in slices, so a
        stop is noticed within a quarter second."""
        deadline = time.monotonic() + seconds
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                if self.store.wait_for_jobs(min(left, 0.25)):
                    return
            except DatabaseError:
                return  # the next claim meets the same failure and handles it

    def _replace_store(self, reconnect: Callable[[], PostgresStore]) -> None:
        try:
            fresh = reconnect()
        except DatabaseError as exc:
            log.warning("reconnect failed: %s", exc)
            return
        old, self.store = self.store, fresh
        with contextlib.suppress(Exception):
            old.conn.close()


def _dead_letter(job: Job, error: str | None) -> DeadLetter:
    return DeadLetter(job.id, job.type, job.queue, job.attempts, error)


def _log_extra(job: Job, outcome: Outcome) -> dict[str, Any]:
    return {
        "job_id": str(job.id),
        "job_type": job.type,
        "attempt": job.attempts,
        "status": outcome.status.value,
        "error": outcome.error,
    }
