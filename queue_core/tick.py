"""The runner: a tick reclaims expired leases, then drains the queue batch by batch.

The pieces it puts together live beside it: `pipeline` (claim and persist, in flight beside
the handlers), `worker` (the long-lived loop), `report` (what a tick did). Here: the drain
a tick runs, and running handlers with their outcomes judged by `transitions`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from . import transitions, worker
from .context import AsyncJobContext, JobContext
from .errors import InvalidJob, JobCancelled, LeaseLost, PermanentError, RetryAfter
from .jobs import DEFAULT_LEASE_SECONDS, DEFAULT_QUEUE, Job, Outcome, Status
from .pipeline import Pipeline
from .ports import Store
from .registry import Registry, Task
from .report import TICK_COUNTERS, DeadLetter, TickReport, log_fields
from .step_context import StepCounts, StepHost, Suspended
from .steps import suspended

log = logging.getLogger("tickq")

__all__ = ["TICK_COUNTERS", "DeadLetter", "Runner", "TickReport"]


class Runner:
    """Runs handlers for claimed jobs. Claims and persists are short statements; handlers run
    outside any transaction, at most `concurrency` at a time."""

    def __init__(
        self,
        store: Store,
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
        self.registry = registry
        self.queues = list(queues)
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.rand = rand
        self._pool: ThreadPoolExecutor | None = None
        self.pipeline = Pipeline(
            store, queues=self.queues, batch_size=batch_size, lease_seconds=lease_seconds
        )
        self.step_counts = StepCounts()
        self._steps = StepHost(lambda: self.store, time_left, self.step_counts)

    @property
    def store(self) -> Store:
        return self.pipeline.store

    @store.setter
    def store(self, store: Store) -> None:
        self.pipeline.store = store

    @property
    def leased_ahead(self) -> bool:
        return self.pipeline.leased_ahead

    def take_ended_parents(self) -> bool:
        return self.pipeline.take_ended_parents()

    def jitter(self) -> float:
        """A factor in [0.5, 1] for idle pauses, so idle workers do not poll in lockstep."""
        return 0.5 + self.rand() / 2

    def close(self) -> None:
        self.pipeline.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # One tick: reclaim, then the drain

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
        self.drain(
            report,
            lambda: should_continue() and (max_batches is None or report.batches < max_batches),
            after_batch,
        )
        report.duration_seconds = time.perf_counter() - started
        return report

    def drain(
        self,
        report: TickReport,
        claim_next: Callable[[], bool],
        after_batch: Callable[[int], None] | None = None,
    ) -> None:
        """Batches until one comes back short or `claim_next()` says stop; the jobs leased
        ahead by the last persist always run, so a drain never leaves a lease behind."""
        if not claim_next():
            return
        while True:
            claimed = self.run_batch(report, claim_next=claim_next, overlap=True)
            if after_batch is not None:
                after_batch(claimed)
            # Ending a parent may have queued its children (dependencies): they are part of
            # the backlog this drain is for, so it claims once more.
            if not self.pipeline.leased_ahead and not (
                self.pipeline.take_ended_parents() and claimed and claim_next()
            ):
                return

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
                report.dead_letters.append(DeadLetter.of(job, job.error))

    def run_batch(
        self,
        report: TickReport,
        *,
        claim_next: Callable[[], bool] = lambda: False,
        overlap: bool = False,
    ) -> int:
        """Run one batch through the pipeline (see Pipeline.run_batch); the caller must go
        on while `leased_ahead`, as tick() and work() do."""
        claimed = self.pipeline.run_batch(
            report, self.run_jobs, claim_next=claim_next, overlap=overlap
        )
        steps, suspends, resumes = self.step_counts.take()
        report.steps += steps
        report.suspended += suspends
        report.resumed += resumes
        return claimed

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
            log.info("job succeeded", extra=log_fields(job, outcome))
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
            extra=log_fields(job, outcome),
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
        reconnect: Callable[[], Store] | None = None,
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
        return worker.work(
            self,
            stop=stop,
            poll_interval=poll_interval,
            reclaim_interval=reclaim_interval,
            on_tick=on_tick,
            reconnect=reconnect,
            listen=listen,
        )
