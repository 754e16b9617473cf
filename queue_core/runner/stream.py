"""Streaming: the runner's loop when several handlers run at once (concurrency above one).

Handler threads take claimed jobs from a buffer as each one frees up, and hand back each
call's outcomes; the loop's thread alone talks to the database, in one statement at a time
that saves the outcomes that ended and claims the slots that freed:

- a job's outcome is saved when the job ends, with whatever else ended meanwhile, within
  SAVE_WITHIN_SECONDS (at once when a claim goes out, or when a batch's worth or half of
  the jobs held ahead ended), never when its batch-mates end: a quick job beside a slow
  one is done when it is, and its lease is never left to run down while it waits;
- claims fill the slots as they free up instead of waiting for a whole batch, and while
  jobs are quick more are claimed ahead, enough to cover a few statements' round trips
  (STATEMENTS_AHEAD) but never more than keep a claimed job's wait for a thread within a
  second and a tenth of its lease, so that no handler thread waits for a round trip; a
  job claimed ahead whose wait still outgrew a third of its lease has its lease renewed
  before it starts, and is dropped if it was lost meanwhile.

The statements are the batch loop's (Store.finish_and_claim_unparsed, fenced by the lease
tokens), and so are the stop rule (StopRule), the resend after a lost connection and the
refusal of one outcome's value (Runner.persist_apart).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from queue_core import telemetry
from queue_core.errors import DatabaseError, InvalidJob, LeaseLost
from queue_core.model.jobs import Job, Outcome
from queue_core.runner import batch_handler
from queue_core.runner.pipeline import QUICK_BATCH_SECONDS, Pipeline
from queue_core.runner.registry import Registry, Task
from queue_core.runner.report import TickReport
from queue_core.store.port import NO_JOBS, ClaimedBatch, Store

log = logging.getLogger("tickq")

# The longest an ended job's outcome waits to be saved with others that end after it.
SAVE_WITHIN_SECONDS = 0.1
# Jobs are claimed ahead of the free slots while calls are quick, as many as the threads
# start within STATEMENTS_AHEAD statements' round trips at the calls' pace, so that no
# thread waits for one, and at least AHEAD_BATCHES batches or AHEAD_JOBS jobs: a statement
# costs the server about a millisecond plus a tenth per job, so statements of a few jobs
# bound the loop (4 threads of 1 ms jobs, 16 jobs ahead in statements of 8: 2,900 jobs/s;
# 64 ahead in statements of 32: 3,300). Whatever the pace, no job claimed ahead should
# wait for a thread longer than a second or a tenth of its lease (QUICK_BATCH_SECONDS),
# and no more than AHEAD_MAX_BATCHES batches (or AHEAD_JOBS) are held: with calls of a few
# microseconds, a second's pace is hundreds of thousands of jobs, and a longer statement
# would ask for more jobs still.
STATEMENTS_AHEAD = 3
AHEAD_BATCHES = 4
AHEAD_MAX_BATCHES = 16
AHEAD_JOBS = 64
# While the queue is empty and handlers still run, a claim is tried again this often (a
# worker that listens is woken sooner by an enqueue's notification)...
RETRY_EMPTY_SECONDS = 1.0
# ...and the notifications are looked at this often meanwhile.
NOTICE_SECONDS = 0.05


class StopRule(Protocol):
    """What the loop asks its caller: whether to claim more, and what to do between batches,
    when the queue is drained and when the database fails. The hooks are optional (None)
    so that a tick, which needs none, pays no call for them."""

    report: TickReport  # the report the next batch counts into
    before_batch: Callable[[TickReport], None] | None
    after_batch: Callable[[int, TickReport], None] | None

    def go_on(self) -> bool:
        """Claim more? Jobs already leased ahead run whatever this says."""
        ...

    def drained(self, claimed: int) -> bool:
        """The queue came back short (`claimed` jobs, maybe none): wait for more and go on
        (True), or end the loop (False)."""
        ...

    def failed(self, exc: DatabaseError) -> bool:
        """The database failed: go on (True), end the loop (False), or raise."""
        ...


class Host(Protocol):
    """What the streaming loop needs of the Runner (queue_core/runner/runner.py)."""

    store: Store
    registry: Registry
    queues: list[str]
    batch_size: int
    concurrency: int
    lease_seconds: int
    pipeline: Pipeline

    def jitter(self) -> float: ...
    def lease_of(self, job: Job) -> float: ...
    def shortest_lease(self, jobs: Sequence[Job]) -> float: ...
    def run_call(self, jobs: Sequence[Job], task: Task | None) -> list[Outcome]: ...
    def read_traceparents(self, jobs: Sequence[Job]) -> None: ...
    def resend(self, report: TickReport) -> None: ...
    def past_abandoned_bound(self, report: TickReport) -> bool: ...
    def count_handlers(self, report: TickReport) -> None: ...
    def persist_apart(
        self, jobs: Sequence[Job], outcomes: Sequence[Outcome], refused: InvalidJob
    ) -> tuple[set[Any], list[Outcome]]: ...
    def span_attributes(self, operation: str, count: int | None = None) -> dict[str, Any]: ...


@dataclass(slots=True)
class Call:
    """One handler call: a job, or a batch handler's jobs."""

    jobs: list[Job]
    task: Task | None
    claimed_at: float


@dataclass(slots=True)
class Ended:
    """What a handler call handed back: the outcomes of its jobs (of those still leased)."""

    jobs: list[Job]
    outcomes: list[Outcome]
    seconds: float
    raised: BaseException | None = None
    dropped: int = 0  # jobs whose lease was lost while they waited: not run


@dataclass
class Stream:
    """The handler threads, their buffer of calls, and what came back."""

    runner: Host
    todo: queue.SimpleQueue[Call | None] = field(default_factory=queue.SimpleQueue)
    done: queue.SimpleQueue[Ended] = field(default_factory=queue.SimpleQueue)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        while len(self.threads) < self.runner.concurrency:
            thread = threading.Thread(
                target=self._serve, name=f"tickq-job-{len(self.threads)}", daemon=True
            )
            thread.start()
            self.threads.append(thread)

    def close(self) -> None:
        for _ in self.threads:
            self.todo.put(None)
        for thread in self.threads:
            thread.join()
        self.threads = []

    def submit(self, jobs: Sequence[Job]) -> None:
        runner = self.runner
        tasks = [runner.registry.get(job.type) for job in jobs]
        claimed_at = time.monotonic()
        if runner.registry.batched:
            for unit in batch_handler.group(jobs, [t.batch_size if t else None for t in tasks]):
                self.todo.put(Call([jobs[i] for i in unit], tasks[unit[0]], claimed_at))
            return
        for job, task in zip(jobs, tasks, strict=True):
            self.todo.put(Call([job], task, claimed_at))

    def _serve(self) -> None:
        while True:
            call = self.todo.get()
            if call is None:
                return
            started = time.monotonic()
            dropped = 0
            if started - call.claimed_at > self.runner.shortest_lease(call.jobs) / 3:
                kept = self._renewed(call.jobs)
                dropped = len(call.jobs) - len(kept)
                call.jobs = kept
            if not call.jobs:
                self.done.put(Ended([], [], 0.0, dropped=dropped))
                continue
            try:
                outcomes = self.runner.run_call(call.jobs, call.task)
            except BaseException as exc:  # an interrupt: the loop raises it
                self.done.put(Ended([], [], 0.0, raised=exc, dropped=len(call.jobs) + dropped))
                continue
            self.done.put(Ended(call.jobs, outcomes, time.monotonic() - started, dropped=dropped))

    def _renewed(self, jobs: list[Job]) -> list[Job]:
        """The jobs of a call that waited long in the buffer, with their leases renewed
        before they start; one whose lease was lost meanwhile (reclaimed) is not run."""
        kept = []
        for job in jobs:
            if job.lease_token is None:
                kept.append(job)
                continue
            try:
                self.runner.store.extend_lease(
                    job.id, job.lease_token, float(self.runner.lease_of(job))
                )
            except LeaseLost:
                extra = {"job_id": str(job.id), "job_type": job.type}
                log.warning("lease lost while the job waited for a handler", extra=extra)
                continue
            except DatabaseError as exc:  # the fenced finish still decides
                log.warning("lease of a waiting job not renewed: %s", exc)
            kept.append(job)
        return kept


class Loop:
    """The streaming loop's state: jobs in hand (claimed, not yet ended), outcomes not yet
    saved, whether the queue came back short, how long calls take."""

    def __init__(self, runner: Host, rule: StopRule, stream: Stream) -> None:
        self.runner = runner
        self.rule = rule
        self.stream = stream
        self.in_hand = 0
        self.jobs: list[Job] = []
        self.outcomes: list[Outcome] = []
        self.first_ended = 0.0
        self.short_since: float | None = None
        self.call_seconds: float | None = None  # a moving average of the calls' durations
        self.statement_seconds = 0.0  # and of the statements' round trips
        self.last_statement = 0.0  # when the last one came back
        self.wait_limit = QUICK_BATCH_SECONDS  # the longest a job claimed ahead should wait
        self.raised: BaseException | None = None

    def go_on(self) -> bool:
        return not self.runner.past_abandoned_bound(self.rule.report) and self.rule.go_on()

    def run(self) -> None:
        runner, rule, pipeline = self.runner, self.rule, self.runner.pipeline
        if pipeline.unsaved is not None:  # left by the batch loop
            jobs, outcomes = pipeline.unsaved
            pipeline.unsaved = None
            self._ended(jobs, outcomes)
        while True:
            if self.raised is not None:
                raise self.raised
            try:
                if pipeline.owed or pipeline.lost_claims:
                    runner.resend(rule.report)
                if pipeline.next:  # leased ahead by the batch loop, or found again
                    self._hand_out(pipeline.next)
                    pipeline.next = NO_JOBS
                self._take_ended(block=False)
                claiming = self.go_on()
                room = self._room() if claiming else 0
                if room or self._save_due():
                    self._statement(room)
                    continue
            except DatabaseError as exc:
                if not rule.failed(exc):
                    self._wait_out()
                    return
                continue
            if self.in_hand == 0 and not self.jobs:
                if not claiming or not rule.drained(0) or not self.go_on():
                    return
                self.short_since = None
                continue
            self._await(claiming)

    def _room(self) -> int:
        """How many jobs to claim now: none while the queue is short (until it is worth
        trying again); else the slots free and jobs ahead (`_ahead`), once a handler thread
        is idle or half of those ahead are free. A claim takes at most a batch
        (Runner.batch_size) or, once calls have shown their pace, the jobs held ahead."""
        if self.short_since is not None:
            if not self._try_again():
                return 0
            self.short_since = None
        runner = self.runner
        ahead = self._ahead()
        room = runner.concurrency + ahead - self.in_hand
        if room <= 0:
            return 0
        if self.in_hand >= runner.concurrency and room < max(1, ahead // 2):
            return 0
        return min(room, max(runner.batch_size, ahead))

    def _ahead(self) -> int:
        """How many jobs to hold claimed beyond the threads (see STATEMENTS_AHEAD); none
        before a call has ended."""
        if self.call_seconds is None:
            return 0
        runner = self.runner
        pace = runner.concurrency / max(self.call_seconds, 1e-6)  # calls started per second
        cover = int(STATEMENTS_AHEAD * self.statement_seconds * pace)
        most = max(AHEAD_MAX_BATCHES * runner.batch_size, AHEAD_JOBS)
        held = min(max(AHEAD_BATCHES * runner.batch_size, AHEAD_JOBS, cover), most)
        return min(held, int(self.wait_limit * pace))

    def _try_again(self) -> bool:
        assert self.short_since is not None
        if self.runner.pipeline.take_released():  # children of a parent that just ended
            return True
        if time.monotonic() - self.short_since >= RETRY_EMPTY_SECONDS * self.runner.jitter():
            return True
        woken = getattr(self.rule, "woken", None)
        return bool(woken is not None and woken())

    def _save_due(self) -> bool:
        """Save now? When nothing else runs, when a batch's worth ended and the loop has
        been idle for as long as a statement takes (so that saves take at most about half
        of its time), when half of the jobs held ahead ended, or SAVE_WITHIN_SECONDS after
        the first of them ended."""
        if not self.jobs:
            return False
        if self.in_hand == 0:
            return True
        now = time.monotonic()
        ended, batch = len(self.jobs), self.runner.batch_size
        if ended >= batch and now - self.last_statement >= self.statement_seconds:
            return True
        if ended >= max(batch, self._ahead() // 2):
            return True
        return now - self.first_ended >= SAVE_WITHIN_SECONDS

    def _await(self, claiming: bool) -> None:
        """Wait for a handler call to end, as long as nothing else is due."""
        if self.jobs:
            due = self.first_ended + SAVE_WITHIN_SECONDS
            if len(self.jobs) >= self.runner.batch_size:
                due = min(due, self.last_statement + self.statement_seconds)
            timeout = max(0.0, due - time.monotonic())
        elif claiming and self.short_since is not None:
            timeout = NOTICE_SECONDS
        else:
            timeout = SAVE_WITHIN_SECONDS
        try:
            ended = self.stream.done.get(timeout=timeout)
        except queue.Empty:
            return
        self._took(ended)
        self._take_ended(block=False)

    def _take_ended(self, *, block: bool) -> None:
        while True:
            try:
                ended = self.stream.done.get(block=block)
            except queue.Empty:
                return
            self._took(ended)

    def _took(self, ended: Ended) -> None:
        self.in_hand -= len(ended.jobs) + ended.dropped
        if ended.raised is not None:
            self.raised = ended.raised
            return
        if ended.jobs:
            self.wait_limit = min(QUICK_BATCH_SECONDS, self.runner.shortest_lease(ended.jobs) / 10)
            last = self.call_seconds
            self.call_seconds = ended.seconds if last is None else 0.8 * last + 0.2 * ended.seconds
            self._ended(ended.jobs, ended.outcomes)

    def _ended(self, jobs: list[Job], outcomes: list[Outcome]) -> None:
        if not self.jobs:
            self.first_ended = time.monotonic()
        self.jobs += jobs
        self.outcomes += outcomes

    def _hand_out(self, claimed: ClaimedBatch) -> None:
        jobs = claimed.jobs()
        if telemetry.active():
            self.runner.read_traceparents(jobs)
        self.in_hand += len(jobs)
        self.stream.submit(jobs)

    def _statement(self, room: int) -> None:
        """Save what ended and claim `room` jobs, in one statement."""
        runner, rule, pipeline = self.runner, self.rule, self.runner.pipeline
        report = rule.report
        if rule.before_batch is not None:
            rule.before_batch(report)
        jobs, outcomes = self.jobs, self.outcomes
        self.jobs, self.outcomes = [], []
        seed = os.urandom(16) if room else None
        started = time.monotonic()
        try:
            with telemetry.span("tickq finish", **runner.span_attributes("settle", len(jobs))):
                held, claimed = runner.store.finish_and_claim_unparsed(
                    outcomes,
                    queues=runner.queues,
                    limit=room,
                    lease_seconds=runner.lease_seconds,
                    seed=seed,
                )
        except InvalidJob as refused:
            # Nothing of the statement stands, its claim included: the outcomes go one by
            # one, and the slots are claimed by the next statement.
            held, outcomes = runner.persist_apart(jobs, outcomes, refused)
            claimed = NO_JOBS
        except DatabaseError:
            pipeline.failed((jobs, outcomes) if jobs else None, seed=seed)
            raise
        self.last_statement = time.monotonic()
        took = self.last_statement - started
        self.statement_seconds = 0.8 * self.statement_seconds + 0.2 * took
        if jobs:
            report.record(jobs, outcomes, held)
            pipeline.note_released(jobs, outcomes)
        runner.count_handlers(report)
        count = len(claimed)
        if count:
            report.batches += 1
            report.claimed += count
            self._hand_out(claimed)
        if room:
            released = pipeline.take_released()
            self.short_since = time.monotonic() if count < room and not released else None
        if rule.after_batch is not None:
            rule.after_batch(count, report)

    def _wait_out(self) -> None:
        """The rule ended the loop after a database failure: the calls under way still end
        (threads cannot be stopped); their outcomes are kept for the next connection."""
        while self.in_hand > 0:
            self._took(self.stream.done.get())
        if self.jobs:
            self.runner.pipeline.failed((self.jobs, self.outcomes), seed=None)
            self.jobs, self.outcomes = [], []
