"""The store on the paths production runs, held to a model that decides for itself.

Workers hold leases (some gone stale) and persist mixed outcomes of several jobs while
claiming the next batch in one statement (`finish_and_claim`, the runner's hot path); jobs
arrive in batches (`enqueue_many`) for several owners and queues, with explicit run_after
and backoff policies with jitter; leases are extended, progress is reported, jobs are
cancelled while running and retried. The model is plain Python over `Job` values: it
decides retry or dead, backoff delays and claim order from its own state, not through
`queue_core.model.transitions`, so a shared mistake cannot hide. Every column is compared after
every step, and the reach of the rare paths (stale leases, retries, jitter) is counted and
asserted over the run.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import astuple, replace
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar
from uuid import UUID

import psycopg
import pytest
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from queue_core.errors import InvalidTransition, LeaseLost
from queue_core.model import transitions, validation
from queue_core.model.jobs import KEY_HOLDING, Job, Outcome, Status
from tests.model.profiles import budget
from tests.model.stores import deterministic_store, empty

T0 = datetime(2030, 1, 1, tzinfo=UTC)
LEASE = 30
QUEUES = ("default", "media")
OWNERS = (None, UUID(int=7))
KEYS = (None, None, "k1", "k2")
POLICIES = (
    {"base": 1, "factor": 2, "max": 10, "jitter": 0},
    {"base": 2, "factor": 3, "max": 5, "jitter": 0.5},
    {"base": 0.5, "factor": 1, "max": 0.5, "jitter": 0.25},
)
# Failures weigh most: retries and dead letters are the decisions the model makes itself.
OUTCOMES = (
    "succeeded",
    "result",
    "failed",
    "failed",
    "failed",
    "permanent",
    "snoozed",
    "cancelled",
)
BATCH = st.lists(
    st.tuples(
        st.sampled_from(QUEUES),
        st.sampled_from(OWNERS),
        st.sampled_from(KEYS),
        st.integers(-1, 1),  # priority
        st.sampled_from([2, 3, 1]),  # max_attempts
        st.sampled_from([None, 0, 1, 5]),  # run_after, seconds from now
        st.sampled_from(POLICIES),
        st.sampled_from([None, 5]),  # lease_seconds
    ),
    min_size=1,
    max_size=4,
)
# Paths most runs must reach; "dead, attempts used" is counted and shown too.
# Runnable at once, so the first claims find work in both queues.
RUNNABLE_BATCH = st.lists(
    st.tuples(
        st.just(QUEUES[0]) | st.just(QUEUES[1]),
        st.sampled_from(OWNERS),
        st.sampled_from(KEYS),
        st.integers(-1, 1),
        st.sampled_from([2, 3, 1]),
        st.none(),
        st.sampled_from(POLICIES),
        st.sampled_from([None, 5]),
    ),
    min_size=2,
    max_size=6,
)
REACH = ("stale outcome refused", "stale heartbeat refused", "retrying")


def raw_delay(job: Job) -> float:
    """min(base * factor^(attempt-1), max): the documented backoff, written out again."""
    return min(job.backoff_base * job.backoff_factor ** max(0, job.attempts - 1), job.backoff_max)


def comparable(job: Job) -> tuple[Any, ...]:
    """Every column; the error history's times parsed (jsonb and Python spell them apart)."""
    errors = [(e["attempt"], _instant(e["at"]), e["error"]) for e in job.errors]
    return (*astuple(replace(job, errors=[])), errors)


def drawing_order(job: Job) -> tuple[int, int]:
    """Candidates for a draw in an order that replays: a job's number, then its attempt."""
    return (job.payload["n"], job.attempts)


def _instant(value: datetime | str) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


class HotPathVersusModel(RuleBasedStateMachine):
    database_url = ""  # bound by the test
    runs: ClassVar[Counter[str]] = Counter()

    def __init__(self) -> None:
        super().__init__()
        self.conn = psycopg.connect(self.database_url, autocommit=True)
        empty(self.conn)
        self.store = deterministic_store(self.conn)
        self.now = T0
        self.model: dict[UUID, Job] = {}
        self.held: list[Job] = []  # leases as their workers see them: some gone stale
        self.reached: set[str] = set()
        self.sequence = 0  # numbers the jobs in payload["n"]: ids are random, draws must not be

    def teardown(self) -> None:
        self.conn.close()
        HotPathVersusModel.runs["runs"] += 1
        for name in self.reached:
            HotPathVersusModel.runs[name] += 1

    def reach(self, name: str) -> None:
        self.reached.add(name)
        event(name)

    def holder(self, key: str | None, owner: UUID | None) -> Job | None:
        if key is None:
            return None
        for job in self.model.values():
            if job.idempotency_key == key and job.user_id == owner and job.status in KEY_HOLDING:
                return job
        return None

    def live(self, lease: Job) -> bool:
        current = self.model[lease.id]
        return current.status == Status.RUNNING and current.lease_token == lease.lease_token

    # The model's own decisions

    def fail(self, job: Job, error: str, *, permanent: bool, delay: float | None) -> Job:
        """A failed attempt: dead when permanent or out of attempts, else retrying after
        `delay` (None: the reclaim's random jitter, checked and adopted by the caller)."""
        history = [*job.errors, {"attempt": job.attempts, "at": self.now, "error": error}]
        dead = permanent or job.attempts >= job.max_attempts
        return replace(
            job,
            status=Status.DEAD if dead else Status.RETRYING,
            error=error,
            errors=history[-20:],
            run_after=job.run_after
            if dead or delay is None
            else self.now + timedelta(seconds=delay),
            lease_until=None,
            lease_token=None,
            cancel_requested=False,
            updated_at=self.now,
            finished_at=self.now if dead else None,
        )

    def end(self, job: Job, status: Status, **changes: Any) -> Job:
        return replace(
            job,
            status=status,
            lease_until=None,
            lease_token=None,
            cancel_requested=False,
            updated_at=self.now,
            finished_at=self.now if status in (Status.SUCCEEDED, Status.CANCELLED) else None,
            **changes,
        )

    def apply(self, job: Job, kind: str, rand: float) -> Job:
        if kind == "succeeded":
            return self.end(job, Status.SUCCEEDED)
        if kind == "result":
            return self.end(job, Status.SUCCEEDED, result={"n": 1})
        if kind == "snoozed":
            return self.end(
                job,
                Status.QUEUED,
                run_after=self.now + timedelta(seconds=2),
                attempts=job.attempts - 1,
                snoozes=job.snoozes + 1,
            )
        if kind == "cancelled":
            error = "cancelled while running"
            history = [*job.errors, {"attempt": job.attempts, "at": self.now, "error": error}]
            return self.end(job, Status.CANCELLED, error=error, errors=history[-20:])
        delay = raw_delay(job) * (1 - job.backoff_jitter * rand)
        after = self.fail(job, "boom", permanent=kind == "permanent", delay=delay)
        if after.status == Status.RETRYING:
            self.reach("retrying")
        elif kind == "failed":
            self.reach("dead, attempts used")
        return after

    # Rules

    @initialize(batch=RUNNABLE_BATCH, data=st.data())
    def start_with_leased_jobs(self, batch: list[tuple[Any, ...]], data: st.DataObject) -> None:
        """Every run starts with jobs leased in both queues and one worker that outlived its
        lease: stale leases and retries need leases, and a run that spends its steps getting
        there reaches neither."""
        self.enqueue_many(batch)
        for queue in QUEUES:
            self.finish_and_claim(data, queue, 3)
        # One late worker right away (the fence's whole reason); the rules add more.
        if self.held:
            self.worker_outlives_its_lease(data, data.draw(st.sampled_from(OUTCOMES)), 1)

    @rule(batch=BATCH)
    def enqueue_many(self, batch: list[tuple[Any, ...]]) -> None:
        specs = [
            validation.job_spec(
                "model",
                {"n": self.sequence + i},
                queue=queue,
                user_id=owner,
                idempotency_key=key,
                priority=priority,
                max_attempts=attempts,
                run_after=None if after is None else self.now + timedelta(seconds=after),
                backoff_policy=policy,
                lease_seconds=lease,
            )
            for i, (queue, owner, key, priority, attempts, after, policy, lease) in enumerate(batch)
        ]
        self.sequence += len(specs)
        results = self.store.enqueue_many(specs, now=self.now)
        assert len(results) == len(specs)
        for spec, result in zip(specs, results, strict=True):
            holder = self.holder(spec.idempotency_key, spec.user_id)
            if holder is not None:
                assert result.duplicate and result.id == holder.id
                continue
            assert not result.duplicate and result.id not in self.model
            self.model[result.id] = Job(
                id=result.id,
                queue=spec.queue,
                type=spec.type,
                user_id=spec.user_id,
                status=Status.QUEUED,
                payload=json.loads(spec.payload_json),
                idempotency_key=spec.idempotency_key,
                attempts=0,
                max_attempts=spec.max_attempts,
                priority=spec.priority,
                run_after=spec.run_after or self.now,
                lease_until=None,
                lease_token=None,
                progress=None,
                result=None,
                error=None,
                errors=[],
                lease_seconds=spec.lease_seconds,
                backoff_base=spec.backoff.base,
                backoff_factor=spec.backoff.factor,
                backoff_max=spec.backoff.max,
                backoff_jitter=spec.backoff.jitter,
                cancel_requested=False,
                created_at=self.now,
                updated_at=self.now,
                started_at=None,
                finished_at=None,
                group_key=spec.group_key,
            )

    @rule(data=st.data(), queue=st.sampled_from(QUEUES), limit=st.integers(0, 3))
    def finish_and_claim(self, data: st.DataObject, queue: str, limit: int) -> None:
        """Outcomes of several held leases (live and stale mixed) and a claim, one statement."""
        picks = data.draw(
            st.lists(st.sampled_from(range(len(self.held))), unique=True, max_size=4)
            if self.held
            else st.just([])
        )
        plans = [
            (self.held[i], data.draw(st.sampled_from(OUTCOMES)), data.draw(st.floats(0, 0.999)))
            for i in picks
        ]
        self.persist(picks, plans, queue, limit)

    @precondition(lambda self: self.held)
    @rule(data=st.data(), kind=st.sampled_from(OUTCOMES), limit=st.integers(0, 2))
    def worker_outlives_its_lease(self, data: st.DataObject, kind: str, limit: int) -> None:
        """A worker sleeps past its lease: the lease is reclaimed (and often claimed again),
        then its heartbeat and its outcome arrive, both refused; its outcome still rides
        with a claim."""
        i = data.draw(st.sampled_from(range(len(self.held))))
        lease = self.held[i]
        assert lease.lease_until is not None
        self.now = max(self.now, lease.lease_until) + timedelta(seconds=1)
        self.reclaim()
        # Past any backoff, another worker claims in that queue, often this very job: the
        # late outcome then meets a running row under a newer token.
        self.now += timedelta(seconds=11)
        self.persist([], [], lease.queue, 3)
        self.beat(lease, 10, data.draw(st.booleans()))
        self.persist([i], [(lease, kind, 0.5)], lease.queue, limit)

    def persist(
        self, picks: list[int], plans: list[tuple[Job, str, float]], queue: str, limit: int
    ) -> None:
        outcomes = [self.outcome(lease, kind, rand) for lease, kind, rand in plans]
        # Jobs finished by this statement still read as running to its claim.
        runnable = sorted(
            (
                j
                for j in self.model.values()
                if j.queue == queue
                and j.status in (Status.QUEUED, Status.RETRYING)
                and j.run_after <= self.now
            ),
            key=lambda j: (-j.priority, j.run_after, j.created_at),
        )
        held, claimed = self.store.finish_and_claim(
            outcomes, queues=[queue], limit=limit, lease_seconds=LEASE, now=self.now
        )

        expected_held = set()
        for lease, kind, rand in plans:
            if self.live(lease):
                expected_held.add(lease.id)
                self.model[lease.id] = self.apply(self.model[lease.id], kind, rand)
            else:
                self.reach("stale outcome refused")
        assert held == expected_held
        self.held = [lease for i, lease in enumerate(self.held) if i not in picks]

        assert len(claimed) == min(limit, len(runnable))
        taken = {j.id for j in claimed}
        order = {j.id: (-j.priority, j.run_after, j.created_at) for j in runnable}
        assert taken <= set(order), "claimed a job that is not runnable in this queue"
        # With one fairness group the claim is strictly best first; with several, the fair
        # claim (queue_core.model.fairness) chooses among groups, which this model leaves alone.
        if len({j.group_key for j in runnable}) <= 1:
            worst = max((order[i] for i in taken), default=None)
            assert all(worst is None or order[j.id] >= worst for j in runnable if j.id not in taken)
        else:
            event("fair claim (several groups)")
        for job in claimed:
            before = self.model[job.id]
            self.model[job.id] = replace(
                before,
                status=Status.RUNNING,
                attempts=before.attempts + 1,
                lease_token=job.lease_token,
                lease_until=self.now + timedelta(seconds=before.lease_seconds or LEASE),
                started_at=self.now,
                updated_at=self.now,
            )
            assert comparable(job) == comparable(self.model[job.id])
            self.held.append(job)
        self.held.sort(key=drawing_order)
        if plans and limit and claimed:
            event("outcomes and a claim in one statement")

    def outcome(self, lease: Job, kind: str, rand: float) -> Outcome:
        """What the runner sends for one handler's result (the engine's own builders)."""
        if kind in ("succeeded", "result"):
            return transitions.succeeded(lease, {"n": 1} if kind == "result" else None)
        if kind == "snoozed":
            return transitions.snoozed(lease, 2)
        if kind == "cancelled":
            return transitions.cancelled_while_running(lease)
        return transitions.failed(lease, "boom", permanent=kind == "permanent", rand=rand)

    @rule()
    def expire_leases(self) -> None:
        """Past every lease, then a reclaim: each lease held now goes stale at once."""
        self.now += timedelta(seconds=LEASE + 1)
        self.reclaim()

    @rule()
    def reclaim(self) -> None:
        reclaimed = {j.id: j for j in self.store.reclaim(now=self.now)}
        expired = [
            j
            for j in self.model.values()
            if j.status == Status.RUNNING
            and j.lease_until is not None
            and j.lease_until <= self.now
        ]
        assert set(reclaimed) == {j.id for j in expired}
        for job in expired:
            if job.cancel_requested:
                error = "cancelled while running"
                history = [*job.errors, {"attempt": job.attempts, "at": self.now, "error": error}]
                after = self.end(job, Status.CANCELLED, error=error, errors=history[-20:])
            else:
                after = self.fail(job, "lease expired", permanent=False, delay=None)
            if after.status == Status.RETRYING:
                # The jitter is the database's random(): check the window, adopt the value.
                raw = raw_delay(job)
                waited = (reclaimed[job.id].run_after - self.now).total_seconds()
                assert raw * (1 - job.backoff_jitter) - 1e-6 <= waited <= raw + 1e-6
                after = replace(after, run_after=reclaimed[job.id].run_after)
                self.reach("retrying")
            elif after.status == Status.DEAD:
                self.reach("dead, attempts used")
            self.model[job.id] = after

    @precondition(lambda self: self.held)
    @rule(data=st.data(), seconds=st.sampled_from([1, 10, 60]), heartbeat=st.booleans())
    def heartbeat(self, data: st.DataObject, seconds: int, heartbeat: bool) -> None:
        """extend_lease or progress under a held lease, stale ones refused by both sides."""
        self.beat(data.draw(st.sampled_from(self.held)), seconds, heartbeat)

    def beat(self, lease: Job, seconds: int, heartbeat: bool) -> None:
        assert lease.lease_token is not None
        if not self.live(lease):
            self.reach("stale heartbeat refused")
            with pytest.raises(LeaseLost):
                if heartbeat:
                    self.store.extend_lease(lease.id, lease.lease_token, seconds, now=self.now)
                else:
                    self.store.report_progress(lease.id, lease.lease_token, seconds, now=self.now)
            return
        job = self.model[lease.id]
        if heartbeat:
            state = self.store.extend_lease(lease.id, lease.lease_token, seconds, now=self.now)
            self.model[job.id] = replace(
                job, lease_until=self.now + timedelta(seconds=seconds), updated_at=self.now
            )
            assert state.lease_until == self.model[job.id].lease_until
            assert state.cancel_requested == job.cancel_requested
        else:
            asked = self.store.report_progress(lease.id, lease.lease_token, seconds, now=self.now)
            self.model[job.id] = replace(job, progress=seconds, updated_at=self.now)
            assert asked == job.cancel_requested

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(sorted(self.model.values(), key=drawing_order)))
        if job.status in (Status.QUEUED, Status.RETRYING):
            expected = replace(
                job, status=Status.CANCELLED, updated_at=self.now, finished_at=self.now
            )
        elif job.status == Status.RUNNING:
            expected = replace(job, cancel_requested=True, updated_at=self.now)
            event("cancel while running")
        else:
            with pytest.raises(InvalidTransition):
                self.store.cancel(job.id, now=self.now)
            return
        self.store.cancel(job.id, now=self.now)
        self.model[job.id] = expected

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(sorted(self.model.values(), key=drawing_order)))
        holder = self.holder(job.idempotency_key, job.user_id)
        if job.status not in (Status.DEAD, Status.CANCELLED) or (
            holder is not None and holder.id != job.id
        ):
            with pytest.raises(InvalidTransition):
                self.store.retry(job.id, now=self.now)
            return
        self.store.retry(job.id, now=self.now)
        self.model[job.id] = replace(
            job,
            status=Status.QUEUED,
            attempts=0,
            run_after=self.now,
            cancel_requested=False,
            updated_at=self.now,
            finished_at=None,
        )
        event("retry")

    @rule(
        attempt=st.integers(0, 70),
        policy=st.sampled_from(POLICIES),
        rand=st.floats(0, 0.999),
    )
    def backoff_formulas_agree(self, attempt: int, policy: dict[str, float], rand: float) -> None:
        """The SQL backoff (reclaim) and the Python one (failed handlers) are one formula."""
        backoff = validation.backoff(policy)
        raw = min(policy["base"] * policy["factor"] ** max(0, attempt - 1), policy["max"])
        row = self.conn.execute(
            "select tickq.backoff_seconds(%s, %s, %s, %s, %s)",
            (attempt, backoff.base, backoff.factor, backoff.max, backoff.jitter),
        ).fetchone()
        assert row is not None
        assert backoff.delay(attempt, rand) == pytest.approx(raw * (1 - backoff.jitter * rand))
        assert raw * (1 - backoff.jitter) - 1e-9 <= row[0] <= raw + 1e-9

    @rule(seconds=st.sampled_from([0.5, 1, 3, 10, 31, 61]))
    def advance_clock(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    # Invariants

    @invariant()
    def store_equals_model_in_every_column(self) -> None:
        stored = {j.id: j for j in self.store.list_jobs(limit=500).jobs}
        assert set(stored) == set(self.model)
        for job_id, job in self.model.items():
            assert comparable(stored[job_id]) == comparable(job), job_id


def test_hot_paths_match_a_model_that_decides_for_itself(database_url: str) -> None:
    HotPathVersusModel.runs.clear()
    machine = type("Bound", (HotPathVersusModel,), {"database_url": database_url})
    run_state_machine_as_test(machine, settings=budget(ci=30, long=800, steps=50))
    runs = HotPathVersusModel.runs
    print("model reach (runs that reached each path):", dict(runs))
    for name in REACH:
        assert runs[name] >= runs["runs"] / 2, (name, dict(runs))
