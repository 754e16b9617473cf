"""The runner: the one claim → run → persist loop, and running handlers with their outcomes
judged by `transitions`.

A tick (TickFunction, `tickq tick`) and the worker (`tickq work`) run the same loop, each
with its own stop rule: a tick reclaims, then drains while it has time left; the worker
(queue_core/runner/worker_rule.py) runs until a signal, napping or waiting for an enqueue when the
queue is empty and reconnecting after a database failure. `pipeline` holds what the loop
keeps between batches; `report` what it did.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from uuid import UUID

from queue_core import telemetry
from queue_core.errors import (
    DatabaseError,
    HandlerConnectionLost,
    InvalidJob,
    JobCancelled,
    LeaseLost,
    PermanentError,
    RetryAfter,
)
from queue_core.model import catalog, transitions
from queue_core.model.events import with_opted_event
from queue_core.model.ids import new_id
from queue_core.model.jobs import DEFAULT_LEASE_SECONDS, DEFAULT_QUEUE, Job, Outcome, Status
from queue_core.model.steps import suspended
from queue_core.model.timed_out import timed_out_error
from queue_core.runner import batch_handler
from queue_core.runner import worker_rule as worker
from queue_core.runner.batch_handler import HandlerBatch
from queue_core.runner.context import AsyncJobContext, JobContext, TransactionalJobContext
from queue_core.runner.durable_context import Compensating, StepCounts, StepHost, Suspended
from queue_core.runner.pipeline import Batch, Pipeline
from queue_core.runner.registry import Registry, Task
from queue_core.runner.report import TICK_COUNTERS, DeadLetter, TickReport, log_fields
from queue_core.runner.stream import Loop, StopRule, Stream
from queue_core.runner.timeouts import (
    DEFAULT_MAX_ABANDONED,
    KILL_GRACE_SECONDS,
    AbandonedHandlers,
    call_in_process,
    call_in_thread,
    run_async,
    timeout_of,
)
from queue_core.store.port import NO_JOBS, ClaimedBatch, HandlerTransactions, JobList, Store

log = logging.getLogger("tickq")

# How soon after its handler ends a job's outcome is saved while its batch-mates still run
# (Runner._keep_ended_leased): the ended jobs of that time go in one statement.
EARLY_SAVE_SECONDS = 0.1

__all__ = ["TICK_COUNTERS", "DeadLetter", "Runner", "StopRule", "TickReport"]


class TickRule:
    """A tick's rule: claim while `should_continue()` and fewer than `max_batches` ran; end
    when the queue is drained; after a database failure, reconnect while time is left (with
    `reconnect`), else end the tick with the error."""

    def __init__(
        self,
        runner: worker.Host,
        report: TickReport,
        should_continue: Callable[[], bool],
        max_batches: int | None,
        after_batch: Callable[[int], None] | None,
        reconnect: Callable[[], Store] | None,
    ) -> None:
        self.runner = runner
        self.reconnect = reconnect
        self.report = report
        self.before_batch: Callable[[TickReport], None] | None = None
        self.after_batch: Callable[[int, TickReport], None] | None = None
        if after_batch is not None:
            self.after_batch = lambda claimed, report: after_batch(claimed)
        self._should_continue = should_continue
        self._max_batches = max_batches

    def go_on(self) -> bool:
        return self._should_continue() and (
            self._max_batches is None or self.report.batches < self._max_batches
        )

    def drained(self, claimed: int) -> bool:
        return False

    def failed(self, exc: DatabaseError) -> bool:
        if self.reconnect is None:
            raise exc

        def out_of_time(seconds: float) -> bool:
            time.sleep(seconds)
            return not self._should_continue()

        if not worker.replace_store(self.runner, self.reconnect, exc, out_of_time):
            raise exc
        return True


class Runner:
    """Owns a store and runs the claim → run → persist loop on it. Claims and persists are
    short statements; handlers run outside any transaction, at most `concurrency` at a time."""

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
        transactions: HandlerTransactions | None = None,
        max_abandoned: int | None = DEFAULT_MAX_ABANDONED,
    ) -> None:
        """`time_left()`: seconds until the invocation ends (a Lambda's remaining time less
        its margin); handlers' steps suspend before a step that would not fit.
        `transactions`: where transactional handlers run, the caller's to close (default:
        connections opened like the store's, closed with the runner).
        `max_abandoned`: how many abandoned handler threads (plain handlers left running
        past their timeout) the runner lives with; past it, it claims no more (None: no
        bound) and its report says `abandoned_past_bound`."""
        if batch_size < 1 or concurrency < 1 or lease_seconds < 1:
            raise ValueError("batch_size, concurrency and lease_seconds must be positive")
        if max_abandoned is not None and max_abandoned < 0:
            raise ValueError("max_abandoned must be 0 or more")
        self.store = store  # a reconnect replaces it
        self.registry = registry
        self.queues = list(queues)
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.rand = rand
        self._pool: ThreadPoolExecutor | None = None
        self._stream: Stream | None = None  # the handler threads of the streaming loop
        # Connections of transactional handlers: opened on the first such job, one per
        # handler running at a time, closed with the runner.
        self._transactions = transactions
        self._owns_transactions = transactions is None
        self._transactions_lock = threading.Lock()
        self._traceparents: dict[UUID, str] = {}  # this batch's, OpenTelemetry on
        self.pipeline = Pipeline()
        # Outcomes of this batch saved while its other handlers ran: (jobs, outcomes, held).
        self._saved_early: list[tuple[list[Job], list[Outcome], set[UUID]]] = []
        self.step_counts = StepCounts()
        self.abandoned = AbandonedHandlers()  # handlers stopped at their timeout
        self.max_abandoned = max_abandoned
        self._time_left = time_left
        self._steps = StepHost(
            lambda: self.store,
            time_left,
            self.step_counts,
            spec=registry.spec,
            code_version=catalog.code_version(registry),
        )

    @property
    def leased_ahead(self) -> bool:
        return self.pipeline.leased_ahead

    def jitter(self) -> float:
        """A factor in [0.5, 1] for idle pauses, so idle workers do not poll in lockstep."""
        return 0.5 + self.rand() / 2

    def close(self) -> None:
        self.pipeline.close()
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._transactions is not None and self._owns_transactions:
            self._transactions.close()
            self._transactions = None

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The callers: a tick and the long-running worker, each with its stop rule

    def tick(
        self,
        *,
        should_continue: Callable[[], bool] = lambda: True,
        max_batches: int | None = None,
        after_batch: Callable[[int], None] | None = None,
        reconnect: Callable[[], Store] | None = None,
    ) -> TickReport:
        """Reclaim, then run batches until the queue is drained, `should_continue()` says
        stop, or `max_batches` ran. `after_batch(claimed)` runs after each batch.

        With `reconnect`, a database failure while `should_continue()` holds, in the reclaim
        or in a batch, is survived as the worker survives it (see `work`); without, or once
        time is up, the tick ends with the error."""
        started = time.perf_counter()
        report = TickReport()
        rule = TickRule(self, report, should_continue, max_batches, after_batch, reconnect)
        self._reclaim_under(rule, report)
        self.loop(rule)
        report.duration_seconds = time.perf_counter() - started
        return report

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
        worker tries `reconnect()` every quarter second or so until it works, listens again
        at once, and first sends the outcomes the failure kept from being persisted (see
        `resend`), then claims on.
        """
        started = time.perf_counter()
        rule = worker.WorkerRule(
            self,
            stop=stop,
            poll_interval=poll_interval,
            reclaim_interval=reclaim_interval,
            on_tick=on_tick,
            reconnect=reconnect,
            listen=listen,
        )
        try:
            self.loop(rule)
        finally:
            rule.close()
        rule.total.duration_seconds = time.perf_counter() - started
        return rule.total

    # The loop

    def loop(self, rule: StopRule) -> None:
        """Claim → run → persist until `rule` ends it. Jobs claimed always run, so the loop
        never leaves a lease behind.

        With several handlers at once, the streaming loop (queue_core/runner/stream.py):
        each job's outcome is saved when it ends and claims fill the slots as they free
        up. With one, batch after batch, each handler in this thread."""
        if self.concurrency > 1:
            if self._stream is None:
                self._stream = Stream(self)
                self._stream.start()
            Loop(self, rule, self._stream).run()
            return
        pipeline = self.pipeline

        def go_on() -> bool:
            return not self.past_abandoned_bound(rule.report) and rule.go_on()

        go = pipeline.leased_ahead or go_on()
        while go:
            report = rule.report
            try:
                # What a failed statement left goes first, before any claim.
                if pipeline.owed or pipeline.lost_claims:
                    self.resend(report)
                    if not (pipeline.next or go_on()):
                        return
                if rule.before_batch is not None:
                    rule.before_batch(report)
                claimed = self.run_batch(report, claim_next=go_on, overlap=True)
            except DatabaseError as exc:
                if not rule.failed(exc):
                    return
                # Reconnected: what the failure left (outcomes to send again, jobs leased
                # ahead) is dealt with even when the rule says stop.
                go = pipeline.leased_ahead or pipeline.owes or go_on()
                continue
            if rule.after_batch is not None:
                rule.after_batch(claimed, report)
            if pipeline.next:  # leased ahead: runs whatever the rule says
                continue
            # Ending a parent may have queued its children (dependencies), and a map's
            # suspension enqueued its children: they are part of the backlog, so the loop
            # claims again rather than count the queue drained. A tick so runs a fan-out
            # to its end while time is left, instead of leaving it to the next tick.
            go = (
                not self.past_abandoned_bound(rule.report)
                and ((pipeline.take_released() and claimed > 0) or rule.drained(claimed))
                and go_on()
            )

    def past_abandoned_bound(self, report: TickReport) -> bool:
        """Whether the abandoned handler threads still running passed `max_abandoned`: the
        loop then claims no more (jobs leased ahead still run and every outcome is saved),
        and the report says so, for `tickq work` to exit and be started afresh, the only
        way to be rid of threads Python cannot stop."""
        if not self.abandoned.past(self.max_abandoned):
            return False
        if not report.abandoned_past_bound:
            report.abandoned_past_bound = True
            log.warning(
                "claiming stopped: %d abandoned handler threads still run (bound %s)",
                self.abandoned.running,
                self.max_abandoned,
            )
        report.abandoned_handlers = self.abandoned.running
        return True

    def resend(self, report: TickReport) -> None:
        """Persist the outcomes a failed statement left behind (Pipeline.owed), on the store
        the failure handler put in place. Fenced by their lease tokens as every finish is:
        a job whose lease still holds finishes once and never runs again, and its handler's
        success costs no attempt; one whose lease was lost meanwhile (reclaimed after its
        lease expired) is dropped and logged as a lost lease.

        Then the jobs that failed claim statements may have leased (Pipeline.lost_claims):
        those still running under their seeds' tokens are taken as the next batch, so they
        run at once, on the attempt their claim spent, instead of waiting out the lease."""
        pipeline = self.pipeline
        if pipeline.owed:
            self._resend_outcomes(report)
        if pipeline.lost_claims:
            found = self.store.recover_claimed(
                pipeline.lost_claims, lease_seconds=self.lease_seconds
            )
            pipeline.lost_claims = []
            log.info("jobs claimed before a lost connection found again: %d", len(found))
            if found:
                pipeline.next = found

    def _resend_outcomes(self, report: TickReport) -> None:
        owed = self.pipeline.owed
        jobs = [job for batch, _ in owed for job in batch]
        outcomes = [outcome for _, batch in owed for outcome in batch]
        held, _ = self.store.finish_and_claim_unparsed(
            outcomes, queues=self.queues, limit=0, lease_seconds=self.lease_seconds
        )
        self.pipeline.owed = []
        log.info("outcomes persisted after a lost connection: %d of %d", len(held), len(jobs))
        report.record(jobs, outcomes, held)
        self.pipeline.note_released(jobs, outcomes)

    def reclaim_surviving(
        self,
        report: TickReport,
        *,
        should_continue: Callable[[], bool],
        reconnect: Callable[[], Store],
    ) -> None:
        """A reclaim pass that outlives a lost connection: after a database failure, a
        fresh store from `reconnect()`, tried on the worker's short interval
        (worker.replace_store) while `should_continue()` holds, and the pass again; the
        error once time is out. Reclaim is one fenced statement, so running it again after
        a failure reclaims each expired lease once."""
        self._reclaim_under(TickRule(self, report, should_continue, None, None, reconnect), report)

    def _reclaim_under(self, rule: TickRule, report: TickReport) -> None:
        """A reclaim pass; a database failure goes to `rule`, which reconnects (and the
        pass runs again) or raises."""
        while True:
            try:
                self.reclaim(report)
                return
            except DatabaseError as exc:
                rule.failed(exc)

    def reclaim(self, report: TickReport) -> None:
        # Children that the statements finishing their parents left to settle (each settles
        # a bounded number, so a parent of 100,000 never stalls another tenant's batch).
        settled = self.store.settle_pending()
        if settled:
            log.info("children settled after their parents finished: %d", settled)
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
        """One batch, claim → run → persist: the batch leased ahead by the last persist,
        else a fresh claim. Returns how many jobs ran; a caller of its own must go on while
        `leased_ahead`, as `loop` does.

        Persisting its outcomes also claims the next batch in the same statement when the
        batch was full and `claim_next()` allows it. With `overlap`, while batches are quick
        (see Pipeline.claims_ahead), that statement goes out on the database thread *before*
        this batch is parsed and run (marked below). Still one statement per batch; this
        batch's outcomes then ride on the next batch's statement.
        """
        pipeline = self.pipeline
        # Claim
        claimed, pipeline.next = pipeline.next, NO_JOBS
        unsaved, pipeline.unsaved = pipeline.unsaved, None
        if not claimed:
            claimed = self._claim()
        if not claimed:
            return 0
        report.batches += 1
        report.claimed += len(claimed)
        # The overlap: the statement persisting the previous batch (and leasing the next
        # one) starts on the database thread now and runs while this batch's handlers do.
        ahead = (
            overlap
            and pipeline.claims_ahead(len(claimed), self.batch_size, self.store.autocommit)
            and claim_next()
        )
        in_flight = None
        ahead_seed = os.urandom(16) if ahead else None  # the leases' seed (Pipeline.lost_claims)
        if ahead or unsaved is not None:
            in_flight = pipeline.in_background(
                self.store.finish_and_claim_unparsed,
                unsaved[1] if unsaved is not None else (),
                queues=self.queues,
                limit=self.batch_size if ahead else 0,
                lease_seconds=self.lease_seconds,
                seed=ahead_seed,
            )
        # Run
        started = time.monotonic()
        self._saved_early = []
        try:
            jobs = claimed.jobs()
            outcomes = self.run_jobs(jobs)
        finally:
            if in_flight is not None:  # never leave a statement running on the connection
                concurrent.futures.wait([in_flight])
        pipeline.timed(time.monotonic() - started, jobs, self.lease_seconds)
        ran = len(jobs)
        if self._saved_early:  # outcomes saved while batch-mates ran: counted now, not again
            jobs, outcomes = self._after_early_saves(report, jobs, outcomes)
        self.count_handlers(report)
        # Persist: the overlapped statement has persisted the previous batch...
        if in_flight is not None:
            ahead = self._persisted_ahead(
                report, in_flight, unsaved, (jobs, outcomes), ahead=ahead, seed=ahead_seed
            )
        if pipeline.next:  # ...and leased the next, whose statement will persist this one
            pipeline.unsaved = (jobs, outcomes)
            return ran
        # ...else one statement now persists this batch and leases the next when it was full.
        more = ran == self.batch_size and not ahead and claim_next()
        seed = os.urandom(16) if more else None
        try:
            with telemetry.span("tickq finish", **self.span_attributes("settle", len(jobs))):
                held, pipeline.next = self.store.finish_and_claim_unparsed(
                    outcomes,
                    queues=self.queues,
                    limit=self.batch_size if more else 0,
                    lease_seconds=self.lease_seconds,
                    seed=seed,
                )
        except InvalidJob as refused:
            # The database refused a value of one outcome; nothing of the statement stands,
            # the next batch's lease included.
            held, outcomes = self.persist_apart(jobs, outcomes, refused)
            if more:
                pipeline.next = self._claim()
        except DatabaseError:
            pipeline.failed((jobs, outcomes), seed=seed)  # for the next connection (`resend`)
            raise
        report.record(jobs, outcomes, held)
        pipeline.note_released(jobs, outcomes)
        return ran

    def count_handlers(self, report: TickReport) -> None:
        """What the batch's handlers did beside their outcomes, now that they have returned:
        steps, suspensions, resumptions, and handlers stopped by their timeout."""
        counts = self.step_counts
        if counts.steps or counts.suspended or counts.resumed:
            steps, suspends, resumes = counts.take()
            report.steps += steps
            report.suspended += suspends
            report.resumed += resumes
        timeouts = self.abandoned.take_timeouts()
        if timeouts:
            report.timed_out += timeouts
        # The gauge, every batch (a worker's report is fresh each batch: left at 0 it would
        # hide threads that still run); free while no thread was ever abandoned.
        report.abandoned_handlers = self.abandoned.running

    def _after_early_saves(
        self, report: TickReport, jobs: list[Job], outcomes: list[Outcome]
    ) -> tuple[list[Job], list[Outcome]]:
        """Count the outcomes saved ahead of the batch, and leave the rest to persist."""
        early: set[UUID] = set()
        for saved_jobs, saved_outcomes, held in self._saved_early:
            report.record(saved_jobs, saved_outcomes, held)
            self.pipeline.note_released(saved_jobs, saved_outcomes)
            early.update(job.id for job in saved_jobs)
        self._saved_early = []
        keep = [i for i, job in enumerate(jobs) if job.id not in early]
        return [jobs[i] for i in keep], [outcomes[i] for i in keep]

    def _persisted_ahead(
        self,
        report: TickReport,
        in_flight: concurrent.futures.Future[tuple[set[UUID], ClaimedBatch]],
        unsaved: Batch | None,
        batch: Batch,
        *,
        ahead: bool,
        seed: bytes | None,
    ) -> bool:
        """Take the overlapped statement's answer: the previous batch persisted, the next
        leased. Returns whether the next batch is leased ahead (False when the statement
        was refused: it stored and leased nothing)."""
        pipeline = self.pipeline
        try:
            held, pipeline.next = in_flight.result()
        except InvalidJob as refused:
            # A value of one of the previous batch's outcomes was refused. Those outcomes
            # go one by one; this batch's are persisted after, as if none was leased ahead.
            pipeline.next, ahead = NO_JOBS, False
            if unsaved is None:
                return ahead
            held, stored = self.persist_apart(*unsaved, refused)
            unsaved = (unsaved[0], stored)
        except DatabaseError:
            # Lost with the connection, maybe: both batches' outcomes are kept for the
            # next connection (see `resend`).
            pipeline.failed(unsaved, batch, seed=seed)
            raise
        if unsaved is not None:
            report.record(*unsaved, held)
            pipeline.note_released(*unsaved)
        return ahead

    def persist_apart(
        self, jobs: Sequence[Job], outcomes: Sequence[Outcome], refused: InvalidJob
    ) -> tuple[set[UUID], list[Outcome]]:
        """After the database refused the statement persisting a batch for a value of one
        of its outcomes: each outcome in a statement of its own, and one refused again
        ends its job dead with the reason. One job's outcome never costs its batch-mates
        theirs (left running, they would end `lease expired`), nor the tick."""
        log.error("a batch's outcomes were refused; persisting them one by one: %s", refused)
        held: set[UUID] = set()
        stored: list[Outcome] = []
        for job, outcome in zip(jobs, outcomes, strict=True):
            try:
                held |= self._persist_one(outcome)
            except InvalidJob as exc:
                log.error("outcome refused: %s", exc, extra=log_fields(job, outcome))
                outcome = transitions.unstorable(outcome, str(exc))
                try:
                    held |= self._persist_one(outcome)
                except InvalidJob as again:  # the row itself is refused: the reclaim's
                    log.error("job left to the reclaim: %s", again, extra=log_fields(job, outcome))
            stored.append(outcome)
        return held, stored

    def _persist_one(self, outcome: Outcome) -> set[UUID]:
        held, _ = self.store.finish_and_claim_unparsed(
            [outcome], queues=self.queues, limit=0, lease_seconds=self.lease_seconds
        )
        return held

    def _claim(self) -> JobList:
        """A fresh claim. Its seed is kept when the statement fails: it may have committed,
        its reply lost with the connection (`resend` finds those jobs again)."""
        seed = os.urandom(16)
        try:
            with telemetry.span("tickq claim", **self.span_attributes("receive")):
                return JobList(
                    self.store.claim(
                        queues=self.queues,
                        limit=self.batch_size,
                        lease_seconds=self.lease_seconds,
                        seed=seed,
                    )
                )
        except DatabaseError:
            self.pipeline.failed(seed=seed)
            raise

    def span_attributes(self, operation: str, count: int | None = None) -> dict[str, Any]:
        """A batch statement's span attributes (only built when OpenTelemetry is on)."""
        if not telemetry.active():
            return {}
        attributes: dict[str, Any] = {
            "messaging.system": telemetry.SYSTEM,
            "messaging.operation": operation,
            "tickq.queues": list(self.queues),
        }
        if count is not None:
            attributes["messaging.batch.message_count"] = count
        return attributes

    # Running handlers

    def run_jobs(self, jobs: Sequence[Job]) -> list[Outcome]:
        if telemetry.active():
            # The enqueuers' trace contexts, for each run's consumer span: one read a batch.
            # Tracing never costs a batch its run: a failed read (the connection lost beside
            # the statement in flight) leaves the runs unparented, and the failure to the
            # batch's own statement.
            try:
                self._traceparents = self.store.traceparents([job.id for job in jobs])
            except DatabaseError as exc:
                log.warning("trace contexts not read: %s", exc)
                self._traceparents = {}
        tasks = [self.registry.get(job.type) for job in jobs]
        if self.registry.batched:
            return self._run_calls(jobs, tasks)
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
            if not async_:
                self._keep_ended_leased(jobs, futures)
        if async_:
            for i, [outcome] in zip(
                async_, self._run_async([[jobs[i]] for i in async_]), strict=True
            ):
                outcomes[i] = outcome
        for i, future in futures:
            outcomes[i] = future.result()
        return [o for o in outcomes if o is not None]

    def _keep_ended_leased(
        self, jobs: Sequence[Job], futures: Sequence[tuple[int, concurrent.futures.Future[Outcome]]]
    ) -> None:
        """Wait for a batch's handlers, saving the outcome of each job whose handler has
        ended while others still run, within EARLY_SAVE_SECONDS of its end (a few at a time):
        a quick job beside a slow one is done when it is, not when its batch is, and its
        lease cannot run down meanwhile, which let another worker reclaim it and run it
        again. A save the database refuses leaves the job to the batch's own persist, its
        lease renewed every third of its lease until then, fenced by its token."""
        pending = {future for _, future in futures}
        saved: set[int] = set()
        renewed: dict[int, float] = {}
        saving = True
        interval = min(self.lease_of(jobs[i]) for i, _ in futures) / 3
        while pending:
            _, pending = concurrent.futures.wait(
                pending,
                timeout=EARLY_SAVE_SECONDS if saving else interval,
                return_when=concurrent.futures.ALL_COMPLETED,
            )
            if not pending:
                return
            ended = [(i, f) for i, f in futures if f.done() and i not in saved]
            if saving and ended:
                saving = self._save_early(
                    [jobs[i] for i, _ in ended], [f.result() for _, f in ended]
                )
                if saving:
                    saved.update(i for i, _ in ended)
                    continue
            now = time.monotonic()
            for i, _ in ended:
                job = jobs[i]
                if job.lease_token is None or now - renewed.get(i, 0.0) < interval:
                    continue
                try:
                    self.store.extend_lease(job.id, job.lease_token, self.lease_of(job))
                except (LeaseLost, DatabaseError) as exc:
                    log.warning("lease of ended job %s not renewed: %s", job.id, exc)
                renewed[i] = now

    def _save_early(self, jobs: Sequence[Job], outcomes: Sequence[Outcome]) -> bool:
        """Persist ended jobs' outcomes ahead of their batch (see `_keep_ended_leased`);
        whether the database took them. The batch's persist then leaves them out."""
        try:
            held, _ = self.store.finish_and_claim_unparsed(
                outcomes, queues=self.queues, limit=0, lease_seconds=self.lease_seconds
            )
        except (InvalidJob, DatabaseError) as exc:
            log.warning("outcomes not saved ahead of their batch: %s", exc)
            return False
        self._saved_early.append((list(jobs), list(outcomes), held))
        return True

    def lease_of(self, job: Job) -> float:
        """The lease a job's claim gave it, as its handler's heartbeats renew it."""
        return float(job.lease_seconds or self.lease_seconds)

    def shortest_lease(self, jobs: Sequence[Job]) -> float:
        return min(self.lease_of(job) for job in jobs)

    def run_call(self, jobs: Sequence[Job], task: Task | None) -> list[Outcome]:
        """One handler call of the streaming loop: a job, or a batch handler's jobs."""
        if task is not None and task.is_async:
            return self._run_async([jobs])[0]
        if task is not None and task.batch_size is not None:
            return self.run_batch_call(jobs, task)
        return [self.run_one(jobs[0], task)]

    def read_traceparents(self, jobs: Sequence[Job]) -> None:
        """The enqueuers' trace contexts of jobs just claimed, for their runs' spans (each
        taken by its run); a failed read leaves the runs unparented."""
        try:
            self._traceparents.update(self.store.traceparents([job.id for job in jobs]))
        except DatabaseError as exc:
            log.warning("trace contexts not read: %s", exc)

    def _run_calls(self, jobs: Sequence[Job], tasks: Sequence[Task | None]) -> list[Outcome]:
        """run_jobs for a registry with batch handlers: each batch handler's jobs of the
        claim go to it in calls of up to its batch size, every other job alone; the calls
        run at most `concurrency` at a time, as single jobs do."""
        units = batch_handler.group(jobs, [t.batch_size if t else None for t in tasks])
        outcomes: list[Outcome | None] = [None] * len(jobs)

        def run(unit: list[int]) -> list[Outcome]:
            task = tasks[unit[0]]
            if task is not None and task.batch_size is not None:
                return self.run_batch_call([jobs[i] for i in unit], task)
            return [self.run_one(jobs[unit[0]], task)]

        def keep(unit: list[int], results: list[Outcome]) -> None:
            for i, outcome in zip(unit, results, strict=True):
                outcomes[i] = outcome

        sync = [u for u in units if tasks[u[0]] is None or not tasks[u[0]].is_async]  # type: ignore[union-attr]
        async_ = [u for u in units if u not in sync]
        futures = []
        if len(sync) == 1 or self.concurrency == 1:
            for unit in sync:
                keep(unit, run(unit))
        elif sync:
            pool = self._executor()
            futures = [(unit, pool.submit(run, unit)) for unit in sync]
        if async_:
            called = self._run_async([[jobs[i] for i in unit] for unit in async_])
            for unit, results in zip(async_, called, strict=True):
                keep(unit, results)
        for unit, future in futures:
            keep(unit, future.result())
        return [o for o in outcomes if o is not None]

    def run_batch_call(self, jobs: Sequence[Job], task: Task) -> list[Outcome]:
        """One call of a batch handler with these jobs of its type; each job's outcome."""
        batch = self._batch(jobs)
        try:
            returned = task.fn(batch)
        except BaseException as exc:  # judged per job below; interrupts are re-raised there
            return self._batch_ended(task, batch, jobs, None, exc)
        return self._batch_ended(task, batch, jobs, returned, None)

    def _batch_ended(
        self,
        task: Task,
        batch: HandlerBatch,
        jobs: Sequence[Job],
        returned: Any,
        raised: BaseException | None,
    ) -> list[Outcome]:
        """Each job's outcome of a batch handler call (sync or async) that returned or
        raised, with the events its task opted into."""
        settled = batch.outcomes(returned, raised, judge=self._judge, succeed=self._succeeded)
        return with_events(task, jobs, settled)

    def _batch(self, jobs: Sequence[Job]) -> HandlerBatch:
        """The `batch` of one batch handler call. Its jobs get no durable steps: a step
        belongs to one job's call."""
        return HandlerBatch(
            new_id(), [JobContext(job, self.store, self.lease_seconds) for job in jobs]
        )

    def run_one(self, job: Job, task: Task | None) -> Outcome:
        if not telemetry.active():
            return self._run_one(job, task)
        with telemetry.get().job(job, self._traceparents.pop(job.id, None)) as ended:
            outcome = self._run_one(job, task)
            ended(outcome.status.value)
            return outcome

    def _run_one(self, job: Job, task: Task | None) -> Outcome:
        if task is None:
            known = ", ".join(self.registry.names()) or "none"
            return transitions.failed(
                job,
                f"no handler registered for type {job.type!r} (known: {known})",
                rand=self.rand(),
            )
        if task.transactional:
            return self._run_in_transaction(job, task)
        timeout = timeout_of(job, task.timeout)
        if timeout is not None and not self._fits(timeout):
            return self._put_back(job, timeout)
        if task.isolation == "process":
            return with_event(task, job, self._run_in_process(job, task, timeout))
        context = JobContext(job, self.store, self.lease_seconds, self._steps, task.step_seconds)
        if timeout is not None:
            return with_event(
                task, job, self._settle(context, self._run_timed(job, task, context, timeout))
            )
        try:
            result = task.fn(context)
        except BaseException as exc:  # judged below; interrupts are re-raised there
            return with_event(task, job, self._settle(context, self._judge(job, exc)))
        return with_event(task, job, self._settle(context, self._succeeded(job, result)))

    def _run_timed(self, job: Job, task: Task, context: JobContext, timeout: int) -> Outcome:
        """A plain handler with a timeout, in a thread of its own: past the timeout the
        attempt fails, the thread is abandoned (its late return never read) and the context
        refuses its writes; the failure's fenced finish ends the attempt's lease token."""
        call = call_in_thread(task.fn, context, timeout)
        if call.done.is_set():
            if call.raised is not None:
                return self._judge(job, call.raised)
            return self._succeeded(job, call.result)
        context.timed_out(timeout)
        self.abandoned.add(call.thread)
        return self._timed_out(job, timeout, "abandoned", abandoned=self.abandoned.running)

    def _run_in_process(self, job: Job, task: Task, timeout: int | None) -> Outcome:
        """A process-isolated handler: its child's result, its error judged as a handler's,
        or the timeout's failure when the child was killed."""
        reply = call_in_process(task.fn, job, timeout)
        if reply.timed_out:
            assert timeout is not None
            self.abandoned.count_timeout()
            return self._timed_out(job, timeout, "killed")
        if reply.error_type is None:
            assert reply.result_json is not None
            return self._succeeded(job, json.loads(reply.result_json))
        if reply.retry_after is not None:
            return self._judge(job, RetryAfter(reply.retry_after, reply.error))
        if reply.error_type == "PermanentError":
            return self._judge(job, PermanentError(reply.error))
        outcome = transitions.failed(job, f"{reply.error_type}: {reply.error}", rand=self.rand())
        self._log_failure(job, outcome)
        return outcome

    def _timed_out(self, job: Job, timeout: int, how: str, **extra: Any) -> Outcome:
        outcome = transitions.failed(job, timed_out_error(timeout, how), rand=self.rand())
        self._log_failure(job, outcome, **extra)
        return outcome

    def _fits(self, timeout: int) -> bool:
        """Whether a handler of this timeout can run to it before the invocation ends."""
        return self._time_left is None or timeout <= self._time_left()

    def _put_back(self, job: Job, timeout: int) -> Outcome:
        """A job whose timeout does not fit in the invocation's time left is not started:
        it goes back, its attempt given back, for after this invocation."""
        assert self._time_left is not None
        delay = max(0.0, self._time_left())
        log.info(
            "job put back: its timeout does not fit in the time left",
            extra={"job_id": str(job.id), "job_type": job.type, "timeout": timeout},
        )
        return transitions.snoozed(job, delay)

    def _run_in_transaction(self, job: Job, task: Task) -> Outcome:
        """fn(job, conn) and the job's fenced success in one transaction of a connection of
        its own: the outcome is stored by that commit, so the batch's statement skips it."""
        context = TransactionalJobContext(
            job, self.store, self.lease_seconds, self._steps, task.step_seconds, task.events
        )
        try:
            outcome = self._handler_transactions().run(context, task.fn)
        except HandlerConnectionLost as exc:
            log.warning("left to the reclaim: %s", exc, extra={"job_id": str(job.id)})
            return dataclasses.replace(transitions.failed(job, str(exc)), abandoned=True)
        except BaseException as exc:  # rolled back; judged as any handler's exception
            # Finished by the batch's statement, after the undos its stored steps owe (they
            # were stored on the worker's connection, so outlive the rollback), with the
            # events a plain handler's writes.
            return with_event(task, job, self._settle(context, self._judge(job, exc)))
        if log.isEnabledFor(logging.INFO):
            log.info("job succeeded in its handler's transaction", extra=log_fields(job, outcome))
        return outcome

    def _handler_transactions(self) -> HandlerTransactions:
        with self._transactions_lock:
            if self._transactions is None:
                self._transactions = self.store.handler_transactions()
            return self._transactions

    def _run_async(self, calls: Sequence[Sequence[Job]]) -> list[list[Outcome]]:
        """Async handler calls on one event loop, at most `concurrency` at a time: each call
        one job, or a batch handler's jobs; the outcomes of each call."""

        async def run_all() -> list[list[Outcome]]:
            limit = asyncio.Semaphore(self.concurrency)

            async def run(jobs: Sequence[Job]) -> list[Outcome]:
                job = jobs[0]
                if len(jobs) > 1 or not telemetry.active():
                    return await run_untraced(jobs)
                with telemetry.get().job(job, self._traceparents.pop(job.id, None)) as ended:
                    outcomes = await run_untraced(jobs)
                    ended(outcomes[0].status.value)
                    return outcomes

            async def run_untraced(jobs: Sequence[Job]) -> list[Outcome]:
                job = jobs[0]
                task = self.registry.get(job.type)
                assert task is not None
                async with limit:
                    if task.batch_size is not None:
                        batch = self._batch(jobs)
                        try:
                            returned = await task.fn(batch)
                        except BaseException as exc:
                            return self._batch_ended(task, batch, jobs, None, exc)
                        return self._batch_ended(task, batch, jobs, returned, None)
                    timeout = timeout_of(job, task.timeout)
                    if timeout is not None and not self._fits(timeout):
                        return [self._put_back(job, timeout)]
                    context = AsyncJobContext(
                        job, self.store, self.lease_seconds, self._steps, task.step_seconds
                    )
                    try:
                        if timeout is None:
                            result = await task.fn(context)
                        else:
                            result = await _within(task.fn(context), timeout)
                    except _StoppedAtTimeout:
                        assert timeout is not None
                        context.timed_out(timeout)  # in case it swallowed the cancellation
                        self.abandoned.count_timeout()
                        outcome = self._timed_out(job, timeout, "cancelled")
                    except BaseException as exc:
                        outcome = self._judge(job, exc)
                    else:
                        outcome = self._succeeded(job, result)
                    return [with_event(task, job, self._settle(context, outcome))]

            return list(await asyncio.gather(*(run(jobs) for jobs in calls)))

        return run_async(run_all())

    @staticmethod
    def _settle(context: JobContext, outcome: Outcome) -> Outcome:
        """A job whose handler used steps may owe undos before it ends (compensation): a
        job ending dead or cancelled after steps with an undo, or one replayed to finish
        its compensation, whatever its handler did this time."""
        steps = context.steps_used
        if steps is None or outcome.suspended:
            return outcome
        if steps.compensating is None and not steps.undos:
            return outcome
        try:
            return steps.compensate(outcome)
        except (LeaseLost, DatabaseError) as exc:
            # Nothing more may be written for this attempt: the next one (after the
            # reclaim) finds the compensation and the undos done so far, and goes on.
            log.warning("compensation interrupted: %s", exc, extra={"job_id": str(context.id)})
            return outcome

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
            return suspended(job, spawned=exc.spawned)
        if isinstance(exc, Compensating):  # judged by the compensation (_settle)
            return transitions.failed(job, "compensating", permanent=True)
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
        self._log_failure(job, outcome)
        return outcome

    @staticmethod
    def _log_failure(job: Job, outcome: Outcome, **extra: Any) -> None:
        log.log(
            logging.ERROR if outcome.status == Status.DEAD else logging.WARNING,
            "job %s",
            outcome.status.value,
            extra={**log_fields(job, outcome), **extra},
        )

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="tickq-job")
        return self._pool


class _StoppedAtTimeout(Exception):
    """An async handler was cancelled at its timeout."""


async def _within(call: Any, timeout: float) -> Any:
    """Await a handler's coroutine for at most `timeout` seconds; past it, cancel it, give
    it KILL_GRACE_SECONDS to unwind, and raise _StoppedAtTimeout. Not asyncio.wait_for: a
    TimeoutError the handler raises itself is its own failure, not the timeout."""
    task = asyncio.ensure_future(call)
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if done:
        return task.result()
    task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.wait({task}, timeout=KILL_GRACE_SECONDS)
    raise _StoppedAtTimeout


def with_event(task: Task, job: Job, outcome: Outcome) -> Outcome:
    """The outcome carrying the lifecycle event its task opted into, if any: the finish that
    persists it writes the event into the outbox (a task that opts into none pays a test)."""
    if not task.events:
        return outcome
    return with_opted_event(task.events, job, outcome)


def with_events(task: Task, jobs: Sequence[Job], outcomes: Sequence[Outcome]) -> list[Outcome]:
    """with_event for each job of a batch handler's call, in the call's order."""
    if not task.events:
        return list(outcomes)
    return [with_event(task, job, o) for job, o in zip(jobs, outcomes, strict=True)]
