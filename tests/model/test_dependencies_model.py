"""Dependencies: the Postgres store and the pure rules agree on random graphs.

A hypothesis state machine builds graphs (chains, fan-out, fan-in, diamonds) one enqueue or
one enqueue_many call at a time, then drives them with random outcomes (success, failure,
permanent failure, lease expiry, cancellation, operator retry) on a real database, and
applies the same steps to a dict of `Job` values through `queue_core.model.transitions` and
`queue_core.model.dependencies`. After every step the two must agree, and no waiting job may be
stuck: a waiting job always has a parent that is not finished yet.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import queue_core
from queue_core.errors import InvalidParent, InvalidTransition
from queue_core.model import dependencies, transitions, validation
from queue_core.model.jobs import TERMINAL, Job, Status
from tests.model import test_store_matches_transitions as base
from tests.model.profiles import budget
from tests.model.stores import deterministic_store, empty

FAILED = (Status.DEAD, Status.CANCELLED)


class GraphVersusModel(RuleBasedStateMachine):
    database_url = ""

    def __init__(self) -> None:
        super().__init__()
        self.conn = psycopg.connect(self.database_url, autocommit=True)
        empty(self.conn)
        self.store = deterministic_store(self.conn)
        self.now = base.T0
        self.model: dict[UUID, Job] = {}
        self.parents_of: dict[UUID, list[UUID]] = {}

    def teardown(self) -> None:
        self.conn.close()

    # Helpers

    def ids(self) -> list[UUID]:
        """In creation order: random ids sorted would make the same draws pick other jobs."""
        return list(self.model)

    def running(self) -> list[Job]:
        return [j for j in self.model.values() if j.status == Status.RUNNING]

    def ended(self, jobs: list[Job]) -> None:
        """Record jobs' new states, then settle their children as the store did."""
        for job in jobs:
            self.model[job.id] = job
        finished = [j.id for j in jobs if j.status in TERMINAL]
        self.model.update(dependencies.settle(self.model, self.parents_of, finished, now=self.now))

    def add(self, job_id: UUID, parents: tuple[UUID, ...]) -> None:
        waiting = any(self.model[p].status != Status.SUCCEEDED for p in parents)
        spec = validation.job_spec("model", {"n": len(self.model)}, max_attempts=2)
        self.model[job_id] = transitions.new_job(spec, id=job_id, now=self.now, waiting=waiting)
        if parents:
            self.parents_of[job_id] = list(parents)

    # Rules: building graphs

    @rule(data=st.data())
    def enqueue_after(self, data: st.DataObject) -> None:
        parents = tuple(
            data.draw(st.lists(st.sampled_from(self.ids()), max_size=3, unique=True))
            if self.model
            else ()
        )
        refused = [p for p in parents if self.model[p].status in FAILED]
        if refused:
            before = self.store.list_jobs(limit=500).jobs
            with pytest.raises(InvalidParent):
                queue_core.enqueue(self.conn, "model", {}, after=parents, now=self.now)
            assert len(self.store.list_jobs(limit=500).jobs) == len(before)
            return
        result = queue_core.enqueue(
            self.conn,
            "model",
            {"n": len(self.model)},
            max_attempts=2,
            after=parents,
            now=self.now,
        )
        self.add(result.id, parents)
        assert result.status == self.model[result.id].status

    @rule(data=st.data(), size=st.integers(2, 4))
    def enqueue_graph(self, data: st.DataObject, size: int) -> None:
        """One enqueue_many call: each request after earlier positions and live jobs."""
        live = [i for i in self.ids() if self.model[i].status not in FAILED]
        requests: list[dict[str, Any]] = []
        for position in range(size):
            choices: list[UUID | int] = [*range(position), *live]
            refs = data.draw(st.lists(st.sampled_from(choices), max_size=3)) if choices else []
            requests.append(
                {
                    "type": "model",
                    "payload": {"n": len(self.model) + position},
                    "max_attempts": 2,
                    "after": refs,
                }
            )
        results = queue_core.enqueue_many(self.conn, requests, now=self.now)
        for request, result in zip(requests, results, strict=True):
            parents = dependencies.resolve(request["after"], results)
            self.add(result.id, parents)
            assert result.status == self.model[result.id].status

    # Rules: outcomes

    @rule(limit=st.integers(1, 4))
    def claim(self, limit: int) -> None:
        claimed = self.store.claim(limit=limit, lease_seconds=base.LEASE, now=self.now)
        runnable = [j for j in self.model.values() if transitions.is_runnable(j, self.now)]
        assert len(claimed) == min(limit, len(runnable))
        for job in claimed:
            assert job.lease_token is not None
            self.model[job.id] = transitions.claim(
                self.model[job.id], now=self.now, lease_seconds=base.LEASE, token=job.lease_token
            )

    @precondition(lambda self: self.running())
    @rule(data=st.data(), verdict=st.sampled_from(["succeed", "succeed", "fail", "permanent"]))
    def finish(self, data: st.DataObject, verdict: str) -> None:
        job = data.draw(st.sampled_from(self.running()))
        if verdict == "succeed":
            outcome = transitions.succeeded(job, {"from": str(job.id)})
        else:
            outcome = transitions.failed(job, "boom", permanent=verdict == "permanent")
        assert self.store.finish([outcome], now=self.now) == {job.id}
        self.ended([transitions.finish(job, outcome, now=self.now)])

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        job = self.model[data.draw(st.sampled_from(self.ids()))]
        try:
            expected = transitions.cancel(job, now=self.now)
        except InvalidTransition:
            with pytest.raises(InvalidTransition):
                self.store.cancel(job.id, now=self.now)
            return
        self.store.cancel(job.id, now=self.now)
        self.ended([expected])

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        """A dead or cancelled job goes back to the queue only once its parents succeeded."""
        job = self.model[data.draw(st.sampled_from(self.ids()))]
        try:
            expected: Job | None = transitions.retry(job, now=self.now)
        except InvalidTransition:
            expected = None
        parents = self.parents_of.get(job.id, ())
        if expected is None or any(self.model[p].status != Status.SUCCEEDED for p in parents):
            with pytest.raises(InvalidTransition):
                self.store.retry(job.id, now=self.now)
            return
        self.store.retry(job.id, now=self.now)
        self.model[job.id] = expected

    @rule()
    def reclaim(self) -> None:
        reclaimed = self.store.reclaim(now=self.now)
        expected = [j for j in self.model.values() if transitions.is_reclaimable(j, self.now)]
        assert {j.id for j in reclaimed} == {j.id for j in expected}
        self.ended([transitions.reclaim(j, now=self.now) for j in expected])

    @rule(seconds=st.sampled_from([1, 3, 31]))
    def advance_clock(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    # Invariants

    @invariant()
    def store_equals_model(self) -> None:
        stored = {j.id: j for j in self.store.list_jobs(limit=500).jobs}
        assert set(stored) == set(self.model)
        for job_id, job in self.model.items():
            assert base.observable(stored[job_id]) == base.observable(job), job_id

    @invariant()
    def edges_and_counts_match(self) -> None:
        rows = self.conn.execute(
            "select child_id, parent_id from tickq.job_dependencies"
        ).fetchall()
        assert sorted(rows) == sorted((c, p) for c, ps in self.parents_of.items() for p in ps)
        counts = dict(
            self.conn.execute(
                "select id, pending_parents from tickq.jobs where status = 'waiting'"
            ).fetchall()
        )
        for job_id, pending in counts.items():
            unfinished = [
                p for p in self.parents_of[job_id] if self.model[p].status != Status.SUCCEEDED
            ]
            assert pending == len(unfinished), job_id

    @invariant()
    def no_waiting_job_is_stuck(self) -> None:
        for job_id, job in self.model.items():
            if job.status == Status.WAITING:
                statuses = {self.model[p].status for p in self.parents_of[job_id]}
                assert statuses - {Status.SUCCEEDED}, f"{job_id} waits for finished parents"
                assert not statuses & set(FAILED), f"{job_id} waits for a failed parent"


def test_store_and_pure_rules_agree_on_random_graphs(database_url: str) -> None:
    machine = type("BoundGraphVersusModel", (GraphVersusModel,), {"database_url": database_url})
    run_state_machine_as_test(machine, settings=budget(ci=30, long=1000, steps=40))
