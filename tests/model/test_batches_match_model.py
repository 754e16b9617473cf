"""Batch consume: the runner on a real database, held to a model of how a claim is split
into handler calls and what each job's outcome is.

Random jobs of four types (batch handlers of sizes 3 and 5, an async one of size 2, and a
plain handler) each carry a plan, one action per attempt: succeed with a result, fail, fail
for good, snooze, or make the whole call raise. Claims of a random size run one at a time
(claim, run, persist), with a random concurrency. After every claim the model, plain
Python over the plans, checks the calls (one type each, at most its batch size, in claim
order, as few as the size allows) and every job's status, attempts, attempt limit, result
and error count.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import psycopg
from hypothesis import given
from hypothesis import strategies as st

from queue_core import HandlerBatch, JobContext, PermanentError, Registry, RetryAfter, Runner
from queue_core.model.jobs import Status
from queue_core.runner.runner import TickReport
from tests.model.profiles import budget
from tests.model.stores import deterministic_store, empty

SIZES = {"embed3": 3, "embed5": 5, "aembed2": 2, "plain": None}
ACTIONS = ("ok", "ok", "fail", "dead", "snooze", "boom")
INSTANT = {"base": 0.001, "max": 0.001}
MAX_ATTEMPTS = 3


@dataclass
class Expected:
    """What the model says of one job."""

    status: Status = Status.QUEUED
    attempts: int = 0
    max_attempts: int = MAX_ATTEMPTS
    result: Any = None
    errors: int = 0
    snoozes: int = 0

    @property
    def runs(self) -> int:
        """Handler runs so far: the attempts, and the runs that snoozed (given back)."""
        return self.attempts + self.snoozes


def action(plan: list[str], attempt: int) -> str:
    return plan[attempt - 1] if attempt <= len(plan) else "ok"


class Handlers:
    """The four handlers, acting out each job's plan and logging each call's jobs."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []
        self._lock = threading.Lock()
        self.registry = Registry()
        for name in ("embed3", "embed5"):
            self.registry.task(name, batch_size=SIZES[name], backoff=INSTANT)(self.batch)
        self.registry.task("aembed2", batch_size=2, backoff=INSTANT)(self.async_batch)
        self.registry.task("plain", backoff=INSTANT)(self.plain)

    def log(self, type_: str, jobs: list[JobContext]) -> None:
        with self._lock:
            self.calls.append((type_, [job.payload["n"] for job in jobs]))

    def batch(self, batch: HandlerBatch) -> list[int]:
        self.log(batch.jobs[0].type, batch.jobs)
        boom = False
        for job in batch.jobs:
            todo = action(job.payload["plan"], job.attempt + job.snoozes)
            if todo == "fail":
                batch.fail(job, RuntimeError("planned failure"))
            elif todo == "dead":
                batch.fail(job, PermanentError("planned for good"))
            elif todo == "snooze":
                batch.retry_after(job, 0)
            boom = boom or todo == "boom"
        if boom:
            raise RuntimeError("planned call failure")
        return [job.payload["n"] * 10 + job.attempt + job.snoozes for job in batch.jobs]

    async def async_batch(self, batch: HandlerBatch) -> list[int]:
        return self.batch(batch)

    def plain(self, job: JobContext) -> int:
        self.log("plain", [job])
        todo = action(job.payload["plan"], job.attempt + job.snoozes)
        if todo in ("fail", "boom"):
            raise RuntimeError("planned failure")
        if todo == "dead":
            raise PermanentError("planned for good")
        if todo == "snooze":
            raise RetryAfter(0)
        return int(job.payload["n"] * 10 + job.attempt + job.snoozes)


def settle(job: Expected, todo: str, call_failed: bool, result: int) -> None:
    """The model's verdict for one job of a call (attempts already counted)."""
    if todo == "snooze":  # the attempt given back, counted as a snooze
        job.status, job.attempts, job.snoozes = Status.QUEUED, job.attempts - 1, job.snoozes + 1
    elif todo == "dead":
        job.status, job.errors = Status.DEAD, job.errors + 1
    elif todo in ("fail", "boom") or call_failed:
        job.errors += 1
        job.status = Status.DEAD if job.attempts >= job.max_attempts else Status.RETRYING
    else:
        job.status, job.result = Status.SUCCEEDED, result


def check_calls(calls: list[tuple[str, list[int]]], types: list[str]) -> None:
    """One type per call, at most its batch size, claim order (n) kept, as few calls as
    the size allows."""
    by_type: dict[str, list[list[int]]] = defaultdict(list)
    for type_, ns in calls:
        assert all(types[n] == type_ for n in ns), calls
        by_type[type_].append(ns)
    for type_, chunks in by_type.items():
        size = SIZES[type_] or 1
        assert all(ns == sorted(ns) and len(ns) <= size for ns in chunks), chunks
        claimed = sorted(n for ns in chunks for n in ns)
        assert len(chunks) == math.ceil(len(claimed) / size), (type_, chunks)
        if SIZES[type_] is not None:  # the claim's jobs of the type, chunked in claim order
            expected = {tuple(claimed[i : i + size]) for i in range(0, len(claimed), size)}
            assert {tuple(ns) for ns in chunks} == expected


jobs_strategy = st.lists(
    st.tuples(
        st.sampled_from(sorted(SIZES)),
        st.lists(st.sampled_from(ACTIONS), max_size=4),
    ),
    min_size=1,
    max_size=24,
)


@given(
    jobs=jobs_strategy,
    claim_size=st.integers(1, 12),
    concurrency=st.integers(1, 3),
)
@budget(ci=25, long=300)
def test_batch_calls_and_each_jobs_outcome_match_the_model(
    database_url: str, jobs: list[tuple[str, list[str]]], claim_size: int, concurrency: int
) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        empty(conn)
        store = deterministic_store(conn)
        handlers = Handlers()
        types = [type_ for type_, _ in jobs]
        # Priorities give a claim order by n, so the model knows each call's order.
        specs = [
            handlers.registry.spec(type_, {"n": n, "plan": plan}, priority=1000 - n)
            for n, (type_, plan) in enumerate(jobs)
        ]
        ids = [r.id for r in store.enqueue_many(specs)]
        model = [Expected() for _ in jobs]
        with Runner(store, handlers.registry, batch_size=claim_size, concurrency=concurrency) as r:
            for _ in range(len(jobs) * 8):
                handlers.calls.clear()
                if not r.run_batch(TickReport()):
                    if all(store.get(i).is_terminal for i in ids):
                        break
                    continue  # a retry whose instant backoff has not passed yet
                check_calls(handlers.calls, types)
                for type_, ns in handlers.calls:
                    for n in ns:
                        model[n].attempts += 1
                    failed = SIZES[type_] is not None and any(
                        action(jobs[n][1], model[n].runs) == "boom" for n in ns
                    )
                    for n in ns:
                        todo = action(jobs[n][1], model[n].runs)
                        settle(model[n], todo, failed, n * 10 + model[n].runs)
                for n, job_id in enumerate(ids):
                    job = store.get(job_id)
                    seen = Expected(
                        job.status,
                        job.attempts,
                        job.max_attempts,
                        job.result,
                        len(job.errors),
                        job.snoozes,
                    )
                    assert seen == model[n], (n, jobs[n], seen, model[n])
        assert all(store.get(i).is_terminal for i in ids)
