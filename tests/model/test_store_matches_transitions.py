"""The Postgres store, the in-memory store and the pure state machine agree after every step.

A hypothesis state machine applies random sequences of enqueue (and plain SQL inserts of
keyed jobs), claim, complete, fail, snooze, reclaim, cancel, retry, lease extension and
clock advances to all three: the store on a real database, the `MemoryStore` (the same
port, in this process), and a dict of `Job` values driven by `queue_core.model.transitions`,
with the same explicit `now`. After every step
the fields that decide a job's fate must be equal. The two stores make their own ids and
lease tokens, so the test keeps each Postgres job's twin in memory; every enqueue happens
at its own microsecond, so the claim order is total and both stores must pick the same jobs.
Pausing and resuming the queue (which only the Postgres store knows) is held to the model:
a paused queue's claim takes nothing. So is the storage of finished jobs: day partitions
dropped and made between steps (finishes landing in the default partition, then moved into
their day) change no job.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

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
from queue_core.model.ids import new_id
from queue_core.model.jobs import DEFAULT_QUEUE, KEY_HOLDING, Job, Status
from queue_core.policies import partitions
from queue_core.policies.pauses import QueueNotPaused, QueuePauses
from queue_core.store.memory import MemoryStore
from tests.model.profiles import budget
from tests.model.stores import deterministic_store, empty

T0 = datetime(2030, 1, 1, tzinfo=UTC)
LEASE = 30
KEYS = st.one_of(st.none(), st.sampled_from(["k1", "k2", "k3"]))


def observable(job: Job) -> tuple[Any, ...]:
    """The fields whose agreement the model promises (error history timestamps differ in
    format between Python and jsonb, so only its length is compared)."""
    return (
        job.status,
        job.attempts,
        job.max_attempts,
        job.run_after,
        job.lease_until,
        job.lease_token,
        job.error,
        len(job.errors),
        job.cancel_requested,
        job.finished_at,
        job.result,
        job.progress,
        job.group_key,
        job.snoozes,
    )


def twin_observable(job: Job) -> tuple[Any, ...]:
    """`observable` for the in-memory twin, whose lease token is its own: only whether it
    has one is compared."""
    fields = observable(job)
    return (*fields[:5], fields[5] is not None, *fields[6:])


class StoreVersusModel(RuleBasedStateMachine):
    """A store on a real database, an in-memory store and a dict of pure `Job` values, fed
    the same steps."""

    database_url = ""  # bound by the test, which owns the database fixture

    def __init__(self) -> None:
        super().__init__()
        self.conn = psycopg.connect(self.database_url, autocommit=True)
        empty(self.conn)
        partitions.ensure(self.conn, days_ahead=0, now=T0)  # each run starts with T0's day
        self.store = deterministic_store(self.conn)
        self.now = T0
        self.model: dict[UUID, Job] = {}
        self.stale: list[Job] = []  # claims whose lease another attempt has replaced
        # The in-memory twin claims in plain order: it has no fair claim, so it
        # is compared only until a claim meets runnable jobs of several groups; from then on
        # PostgreSQL is held to the pure model alone (see `retire_twin_if_fair`).
        self.memory: MemoryStore | None = MemoryStore(clock=lambda: self.now)
        self.grouped = False  # chosen per run by choose_groups
        self.twin: dict[UUID, UUID] = {}  # Postgres job id -> the in-memory store's job id
        self.stale_in_memory: list[Job] = []  # the twins of `stale`, index for index
        self.conn.execute("truncate tickq.queue_pauses")
        self.paused: frozenset[str] = frozenset()
        # Each job's max_attempts as first seen, right after the step that created it.
        self.declared: dict[UUID, int] = {}

    def teardown(self) -> None:
        self.conn.close()

    # Helpers

    def running(self) -> list[Job]:
        return [j for j in self.model.values() if j.status == Status.RUNNING]

    def key_holder(self, key: str | None) -> Job | None:
        if key is None:
            return None
        for job in self.model.values():
            if job.idempotency_key == key and job.status in KEY_HOLDING:
                return job
        return None

    def in_memory(self, job: Job) -> Job:
        """The in-memory store's twin of a Postgres job, as it stands now."""
        assert self.memory is not None
        return self.memory.get(self.twin[job.id])

    def retire_twin_if_fair(self, runnable: list[Job]) -> None:
        if self.memory is not None and len({j.group_key for j in runnable}) > 1:
            event("twin retired: a claim across several groups")
            self.memory = None

    # Rules

    @initialize(grouped=st.booleans())
    def choose_groups(self, grouped: bool) -> None:
        """Half the runs keep every job in one group, so the in-memory twin is compared
        throughout; the other half spread jobs over groups, exercising the fair claim."""
        self.grouped = grouped

    @rule(
        key=KEYS,
        priority=st.integers(-2, 2),
        max_attempts=st.integers(1, 3),
        delay=st.sampled_from([0, 0, 1, 5]),
        lease_seconds=st.sampled_from([None, 5]),
        group=st.sampled_from([None, None, "a", "b"]),
    )
    def enqueue(
        self,
        key: str | None,
        priority: int,
        max_attempts: int,
        delay: int,
        lease_seconds: int | None,
        group: str | None,
    ) -> None:
        spec = validation.job_spec(
            "model",
            {"n": len(self.model)},
            idempotency_key=key,
            priority=priority,
            max_attempts=max_attempts,
            delay=delay,
            lease_seconds=lease_seconds,
            group=group if self.grouped else None,
        )
        holder = self.key_holder(key)
        result = self.store.enqueue(spec, now=self.now)
        twin = None if self.memory is None else self.memory.enqueue(spec, now=self.now)
        if holder is not None:
            assert result.duplicate and result.id == holder.id
            assert twin is None or (twin.duplicate and twin.id == self.twin[holder.id])
        else:
            assert not result.duplicate and result.id not in self.model
            if twin is not None:
                assert not twin.duplicate
                self.twin[result.id] = twin.id
            self.model[result.id] = transitions.new_job(spec, id=result.id, now=self.now)
        self.now += timedelta(microseconds=1)

    @rule(key=st.sampled_from(["k1", "k2", "k3"]), priority=st.integers(-2, 2))
    def plain_insert(self, key: str, priority: int) -> None:
        """A plain SQL INSERT of a keyed job, as a trigger or another language writes one:
        the database alone refuses a key a live or succeeded job holds (23505), writing
        nothing; a free key makes the job an enqueue would have made."""
        spec = validation.job_spec(
            "model", {"n": len(self.model)}, idempotency_key=key, priority=priority
        )
        job_id = new_id()  # ordered as the store's own ids, so replays draw alike
        insert = (
            "insert into tickq.jobs (id, type, payload, idempotency_key, priority, run_after,"
            " created_at, updated_at) values (%s, %s, %s::jsonb, %s, %s, %s, %s, %s)"
        )
        params = (job_id, spec.type, spec.payload_json, key, priority, self.now, self.now, self.now)
        if self.key_holder(key) is not None:
            with pytest.raises(psycopg.errors.UniqueViolation):
                self.conn.execute(insert, params)
            return
        self.conn.execute(insert, params)
        self.model[job_id] = transitions.new_job(spec, id=job_id, now=self.now)
        if self.memory is not None:
            twin = self.memory.enqueue(spec, now=self.now)
            assert not twin.duplicate
            self.twin[job_id] = twin.id
        self.now += timedelta(microseconds=1)

    @rule(limit=st.integers(1, 4))
    def claim(self, limit: int) -> None:
        runnable = sorted(
            (j for j in self.model.values() if transitions.is_runnable(j, self.now)),
            key=transitions.claim_order,
        )
        self.retire_twin_if_fair(runnable)
        claimed = self.store.claim(limit=limit, lease_seconds=LEASE, now=self.now)
        if DEFAULT_QUEUE in self.paused:  # a paused queue gives the claim nothing
            assert claimed == []
            return
        if self.memory is not None:
            twins = self.memory.claim(limit=limit, lease_seconds=LEASE, now=self.now)
            assert [self.twin[j.id] for j in claimed] == [j.id for j in twins]
        assert len(claimed) == min(limit, len(runnable))
        chosen = {j.id for j in claimed}
        for job in runnable:
            if job.id not in chosen:
                self.check_skipped(job, [self.model[i] for i in chosen])
        for job in claimed:
            assert job.lease_token is not None
            self.model[job.id] = transitions.claim(
                self.model[job.id], now=self.now, lease_seconds=LEASE, token=job.lease_token
            )

    @staticmethod
    def check_skipped(job: Job, taken: list[Job]) -> None:
        """A job left behind is no better than the jobs taken (ties may go either way):
        overall when one group waits, else by priority, and within its own group (the
        claim takes turns across the groups of a level)."""
        if not taken:
            return
        if {t.group_key for t in taken} | {job.group_key} == {job.group_key}:
            assert transitions.claim_order(job) >= max(map(transitions.claim_order, taken))
            return
        assert job.priority <= min(t.priority for t in taken)
        same = [t for t in taken if t.group_key == job.group_key and t.priority == job.priority]
        if same:
            assert transitions.claim_order(job) >= max(map(transitions.claim_order, same))

    @precondition(lambda self: self.running())
    @rule(data=st.data(), result=st.sampled_from([None, 1, {"ok": True}]))
    def complete(self, data: st.DataObject, result: Any) -> None:
        job = data.draw(st.sampled_from(self.running()))
        self.store.complete(job, result, now=self.now)
        if self.memory is not None:
            self.memory.complete(self.in_memory(job), result, now=self.now)
        self.model[job.id] = transitions.finish(
            job, transitions.succeeded(job, result), now=self.now
        )

    @precondition(lambda self: self.running())
    @rule(data=st.data(), permanent=st.booleans())
    def fail(self, data: st.DataObject, permanent: bool) -> None:
        job = data.draw(st.sampled_from(self.running()))
        self.store.fail(job, "boom", permanent=permanent, now=self.now)
        if self.memory is not None:
            self.memory.fail(self.in_memory(job), "boom", permanent=permanent, now=self.now)
        outcome = transitions.failed(job, "boom", permanent=permanent)
        self.model[job.id] = transitions.finish(job, outcome, now=self.now)

    @precondition(lambda self: self.running())
    @rule(data=st.data(), seconds=st.sampled_from([0, 2]))
    def snooze(self, data: st.DataObject, seconds: int) -> None:
        job = data.draw(st.sampled_from(self.running()))
        outcome = transitions.snoozed(job, seconds)
        assert self.store.finish([outcome], now=self.now) == {job.id}
        if self.memory is not None:
            twin = self.in_memory(job)
            snoozed = [transitions.snoozed(twin, seconds)]
            assert self.memory.finish(snoozed, now=self.now) == {twin.id}
        self.model[job.id] = transitions.finish(job, outcome, now=self.now)

    @precondition(lambda self: self.running())
    @rule(data=st.data(), seconds=st.sampled_from([1, 10, 60]))
    def extend_lease(self, data: st.DataObject, seconds: int) -> None:
        job = data.draw(st.sampled_from(self.running()))
        assert job.lease_token is not None
        state = self.store.extend_lease(job.id, job.lease_token, seconds, now=self.now)
        if self.memory is not None:
            twin = self.in_memory(job)
            assert twin.lease_token is not None
            twin_state = self.memory.extend_lease(twin.id, twin.lease_token, seconds, now=self.now)
            assert twin_state == state
        self.model[job.id] = transitions.extend_lease(
            job, token=job.lease_token, seconds=seconds, now=self.now
        )
        assert state.lease_until == self.model[job.id].lease_until

    @precondition(lambda self: self.running())
    @rule(data=st.data(), value=st.integers(0, 100))
    def progress(self, data: st.DataObject, value: int) -> None:
        job = data.draw(st.sampled_from(self.running()))
        assert job.lease_token is not None
        asked = self.store.report_progress(job.id, job.lease_token, value, now=self.now)
        if self.memory is not None:
            twin = self.in_memory(job)
            assert twin.lease_token is not None
            twin_asked = self.memory.report_progress(twin.id, twin.lease_token, value, now=self.now)
            assert twin_asked == asked
        self.model[job.id] = transitions.report_progress(
            job, token=job.lease_token, progress=value, now=self.now
        )
        assert asked == job.cancel_requested

    @rule()
    def reclaim(self) -> None:
        reclaimed = {j.id: j for j in self.store.reclaim(now=self.now)}
        expected = [j for j in self.model.values() if transitions.is_reclaimable(j, self.now)]
        assert set(reclaimed) == {j.id for j in expected}
        if self.memory is not None:
            twins_before = {j.id: self.in_memory(j) for j in expected}
            assert {j.id for j in self.memory.reclaim(now=self.now)} == {
                self.twin[j.id] for j in expected
            }
            self.stale_in_memory += [twins_before[j.id] for j in expected]
        for job in expected:
            self.stale.append(job)
            self.model[job.id] = transitions.reclaim(job, now=self.now)

    @precondition(lambda self: self.stale)
    @rule(data=st.data())
    def finish_with_stale_lease(self, data: st.DataObject) -> None:
        """A worker whose lease was reclaimed is refused, whatever happened since."""
        index = data.draw(st.integers(0, len(self.stale) - 1))
        job = self.stale[index]
        with pytest.raises(LeaseLost):
            self.store.complete(job, "late", now=self.now)
        if self.memory is not None:
            with pytest.raises(LeaseLost):
                self.memory.complete(self.stale_in_memory[index], "late", now=self.now)
        with pytest.raises(LeaseLost):
            transitions.finish(self.model[job.id], transitions.succeeded(job), now=self.now)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        job = self.model[data.draw(st.sampled_from(sorted(self.model)))]
        try:
            expected = transitions.cancel(job, now=self.now)
        except InvalidTransition:
            with pytest.raises(InvalidTransition):
                self.store.cancel(job.id, now=self.now)
            if self.memory is not None:
                with pytest.raises(InvalidTransition):
                    self.memory.cancel(self.twin[job.id], now=self.now)
            return
        self.store.cancel(job.id, now=self.now)
        if self.memory is not None:
            self.memory.cancel(self.twin[job.id], now=self.now)
        self.model[job.id] = expected

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        job = self.model[data.draw(st.sampled_from(sorted(self.model)))]
        holder = self.key_holder(job.idempotency_key)
        try:
            expected = transitions.retry(job, now=self.now)
        except InvalidTransition:
            expected = None
        if expected is None or (holder is not None and holder.id != job.id):
            with pytest.raises(InvalidTransition):
                self.store.retry(job.id, now=self.now)
            if self.memory is not None:
                with pytest.raises(InvalidTransition):
                    self.memory.retry(self.twin[job.id], now=self.now)
            return
        self.store.retry(job.id, now=self.now)
        if self.memory is not None:
            self.memory.retry(self.twin[job.id], now=self.now)
        self.model[job.id] = expected

    @rule(pause=st.booleans())
    def pause_or_resume(self, pause: bool) -> None:
        pauses = QueuePauses(self.conn)
        if pause:
            pauses.pause(DEFAULT_QUEUE, by="model", now=self.now)
            self.paused = frozenset({DEFAULT_QUEUE})
        elif self.paused:
            pauses.resume(DEFAULT_QUEUE)
            self.paused = frozenset()
        else:
            with pytest.raises(QueueNotPaused):
                pauses.resume(DEFAULT_QUEUE)

    @rule(seconds=st.sampled_from([0.5, 1, 3, 10, 31, 120]))
    def advance_clock(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def operate_on_unknown_job(self, data: st.DataObject) -> None:
        """Operations on ids that do not exist change nothing and say so."""
        ghost = uuid4()
        with pytest.raises(LeaseLost):
            self.store.extend_lease(ghost, uuid4(), 10, now=self.now)
        with pytest.raises(LeaseLost):
            self.store.report_progress(ghost, uuid4(), 1, now=self.now)
        if self.memory is not None:
            with pytest.raises(LeaseLost):
                self.memory.extend_lease(ghost, uuid4(), 10, now=self.now)
            with pytest.raises(LeaseLost):
                self.memory.report_progress(ghost, uuid4(), 1, now=self.now)

    @rule(ahead=st.integers(0, 2), drop_today=st.booleans())
    def maintain_partitions(self, ahead: int, drop_today: bool) -> None:
        """Storage only, no job changes: drop today's day partition while no job finished
        today (later finishes land in the default partition), or make the partitions from
        today on, moving what the default partition holds into its days."""
        name = f"jobs_done_{self.now:%Y%m%d}"
        exists = name in {p.name for p in partitions.partitions(self.conn)}
        if drop_today and exists:
            day = datetime(self.now.year, self.now.month, self.now.day, tzinfo=UTC)
            finished_today = self.conn.execute(
                "select exists (select from tickq.jobs where finished_at >= %s"
                " and finished_at < %s)",
                (day, day + timedelta(days=1)),
            ).fetchone()
            if finished_today == (False,):
                self.conn.execute("select * from tickq.jobs_partition_drop(%s)", (name,))
                event("partition dropped")
            return
        if partitions.ensure(self.conn, days_ahead=ahead, now=self.now):
            event("partitions made")

    # Invariants

    @invariant()
    def store_equals_model(self) -> None:
        page = self.store.list_jobs(limit=500)
        stored = {j.id: j for j in page.jobs}
        assert set(stored) == set(self.model)
        for job_id, job in self.model.items():
            assert observable(stored[job_id]) == observable(job), job_id

    @invariant()
    def memory_store_equals_model(self) -> None:
        if self.memory is None:
            return
        in_memory = {j.id: j for j in self.memory.list_jobs(limit=500).jobs}
        assert set(in_memory) == {self.twin[job_id] for job_id in self.model}
        for job_id, job in self.model.items():
            assert twin_observable(in_memory[self.twin[job_id]]) == twin_observable(job), job_id

    @invariant()
    def at_most_one_live_holder_per_key(self) -> None:
        keys = [
            j.idempotency_key
            for j in self.model.values()
            if j.idempotency_key is not None and j.status in KEY_HOLDING
        ]
        assert len(keys) == len(set(keys))

    @invariant()
    def key_table_holds_the_models_keys(self) -> None:
        """tickq.job_keys holds exactly the keys the pure model says are taken, each by the
        job the model says holds it: dead and cancelled jobs freed theirs, retried jobs took
        theirs back."""
        held = {
            (j.idempotency_key, j.id)
            for j in self.model.values()
            if j.idempotency_key is not None and j.status in KEY_HOLDING
        }
        rows = self.conn.execute("select idempotency_key, job_id from tickq.job_keys").fetchall()
        assert len(rows) == len(held)
        assert set(rows) == held

    @invariant()
    def attempts_within_limit(self) -> None:
        for job in self.model.values():
            assert 0 <= job.attempts <= job.max_attempts

    @invariant()
    def max_attempts_stay_as_declared(self) -> None:
        """No step here raises max_attempts (a snooze gives its attempt back off attempts
        and counts itself in snoozes): every job keeps what its enqueue declared."""
        for job_id, job in self.model.items():
            declared = self.declared.setdefault(job_id, job.max_attempts)
            assert job.max_attempts == declared
            assert (
                self.memory is None
                or job_id not in self.twin
                or (self.memory.get(self.twin[job_id]).max_attempts == declared)
            )


def test_store_and_pure_transitions_agree_after_every_step(database_url: str) -> None:
    machine = type("BoundStoreVersusModel", (StoreVersusModel,), {"database_url": database_url})
    run_state_machine_as_test(machine, settings=budget(ci=40, long=1000, steps=40))
