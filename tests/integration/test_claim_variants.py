"""The claim rules hold in every claim variant: the plain claim of one queue and of several,
the limited claim (tickq.claim_limited) and the fair claim (tickq.claim_fair).

The variants share the lease rule (tickq.jobs_lease) and the finish (queries.sql's parts),
so a rule broken in one place breaks every variant; these tests say so variant by variant
(the claim mutants of tests/mutants/catalog.py run them).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import psycopg
import pytest

from queue_core import PostgresStore, Registry, Runner, TickReport
from queue_core.model import transitions
from queue_core.model.jobs import Status
from queue_core.model.validation import job_spec
from queue_core.policies.limits import Limits, type_limit
from queue_core.policies.pauses import QueuePauses

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LEASE = 30
VARIANTS = ("plain", "queues", "limited", "fair")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class Variant:
    """Jobs enqueued and claimed so that one claim variant leases them."""

    def __init__(self, conn: psycopg.Connection, name: str) -> None:
        self.name = name
        if name == "limited":  # a type limit routes the claim through tickq.claim_limited
            Limits(conn).set_type(type_limit("t", max_running=1000))
        self.queues = ("default", "other") if name == "queues" else ("default",)
        self.store = PostgresStore(conn)

    def enqueue(self, count: int, *, now: datetime, **options: object) -> None:
        for i in range(count):
            # Two groups make the queue mixed: the claim takes turns (tickq.claim_fair).
            group = f"g{i % 2}" if self.name == "fair" else None
            queue = self.queues[i % len(self.queues)]
            spec = job_spec("t", {"i": i}, queue=queue, group=group, **options)  # type: ignore[arg-type]
            self.store.enqueue(spec, now=now)

    def claim(self, limit: int, now: datetime) -> list:
        return self.claim_from(self.queues, now, limit)

    def claim_from(self, queues: tuple[str, ...], now: datetime, limit: int = 10) -> list:
        return self.store.claim(queues=queues, limit=limit, lease_seconds=LEASE, now=now)


@pytest.mark.parametrize("name", VARIANTS)
def test_a_claim_leases_with_the_lease_rule(conn: psycopg.Connection, name: str) -> None:
    # Given four jobs, one with a lease of its own
    variant = Variant(conn, name)
    variant.enqueue(3, now=at(0))
    variant.enqueue(1, now=at(0), lease_seconds=90)

    # When they are claimed
    jobs = variant.claim(10, at(5))

    # Then each runs, its first attempt, started now, leased for its lease, under its own token
    assert len(jobs) == 4
    for job in jobs:
        assert job.status is Status.RUNNING
        assert job.attempts == 1
        assert job.started_at == at(5)
        assert job.lease_until == at(5) + timedelta(seconds=job.lease_seconds or LEASE)
    assert sorted(job.lease_until for job in jobs) == [at(35), at(35), at(35), at(95)]
    tokens = {job.lease_token for job in jobs}
    assert None not in tokens and len(tokens) == 4
    assert [variant.store.get(job.id) for job in jobs] == jobs


@pytest.mark.parametrize("name", VARIANTS)
def test_a_job_claimed_again_counts_an_attempt_and_gets_a_new_token(
    conn: psycopg.Connection, name: str
) -> None:
    # Given two jobs that failed once and wait to retry
    variant = Variant(conn, name)
    variant.enqueue(2, now=at(0), max_attempts=5)
    first = variant.claim(10, at(0))
    failed = [transitions.failed(job, "boom") for job in first]
    assert variant.store.finish(failed, now=at(1)) == {job.id for job in first}
    due = max(variant.store.get(job.id).run_after for job in first)

    # When they are claimed again
    again = variant.claim(10, due)

    # Then it is their second attempt, started now, under tokens never used before
    assert sorted(job.id for job in again) == sorted(job.id for job in first)
    assert [job.attempts for job in again] == [2, 2]
    assert [job.started_at for job in again] == [due, due]
    assert not {job.lease_token for job in again} & {job.lease_token for job in first}
    # And a token of the first claim finishes nothing
    stale = [transitions.succeeded(job, None) for job in first]
    assert variant.store.finish(stale, now=due) == set()


@pytest.mark.parametrize("name", VARIANTS)
def test_a_claim_takes_no_job_before_its_run_after(conn: psycopg.Connection, name: str) -> None:
    # Given two jobs due now and two due in a minute, beside them in their queues and groups
    variant = Variant(conn, name)
    variant.enqueue(2, now=at(0))
    variant.enqueue(2, now=at(0), delay=60)

    # Then a claim before the minute is up takes the two due, and one after takes the rest
    assert [job.run_after for job in variant.claim(10, at(59))] == [at(0), at(0)]
    assert [job.run_after for job in variant.claim(10, at(60))] == [at(60), at(60)]


@pytest.mark.parametrize("name", VARIANTS)
def test_a_claim_takes_the_higher_priority_first(conn: psycopg.Connection, name: str) -> None:
    # Given two older jobs at level 0 and two newer ones at level 3, in each queue and group
    variant = Variant(conn, name)
    variant.enqueue(2, now=at(0))
    variant.enqueue(2, now=at(1), priority=3)

    # Then a claim of two takes the higher level, and the next one the rest
    assert [job.priority for job in variant.claim(2, at(5))] == [3, 3]
    assert [job.priority for job in variant.claim(2, at(5))] == [0, 0]


@pytest.mark.parametrize("name", VARIANTS)
def test_a_claim_orders_an_owners_jobs_by_the_owners_priority(
    conn: psycopg.Connection, name: str
) -> None:
    # Given two older jobs and two newer ones their owner ranked higher, in each queue and
    # group (an application user's priority, stored as owner_priority at level 0)
    variant = Variant(conn, name)
    variant.enqueue(2, now=at(0))
    variant.enqueue(2, now=at(1))
    newer = conn.execute(
        "update tickq.jobs set owner_priority = 7 where created_at = %s returning id", (at(1),)
    ).fetchall()

    # Then a claim of two takes the newer ones first
    assert {job.id for job in variant.claim(2, at(5))} == {row[0] for row in newer}
    assert [job.created_at for job in variant.claim(2, at(5))] == [at(0), at(0)]


@pytest.mark.parametrize("name", VARIANTS)
def test_a_batch_runs_an_owners_jobs_in_the_owners_priority_order(
    conn: psycopg.Connection, name: str
) -> None:
    # Given one owner's jobs at level 0, the older ones ranked lower by their owner, all due
    # (an application user's priority, stored as owner_priority)
    variant = Variant(conn, name)
    owner, rank = uuid4(), dict[UUID, int]()
    for age, owner_priority in enumerate((1, 5, 3)):
        variant.enqueue(2, now=at(age), user_id=owner)
        rows = conn.execute(
            "update tickq.jobs set owner_priority = %s where created_at = %s returning id",
            (owner_priority, at(age)),
        ).fetchall()
        rank |= {row[0]: owner_priority for row in rows}
    ran: list[int] = []
    registry = Registry()
    registry.task("t")(lambda job: ran.append(rank[job.id]))

    # When one batch claims and runs them all, one handler at a time
    with Runner(variant.store, registry, queues=variant.queues, concurrency=1) as runner:
        assert runner.run_batch(TickReport()) == 6

    # Then the handlers ran in the owner's order, as the claim took them
    assert ran == [5, 5, 3, 3, 1, 1]


@pytest.mark.parametrize("name", VARIANTS)
def test_a_claims_seed_finds_its_jobs_again_on_their_first_attempt(
    conn: psycopg.Connection, name: str
) -> None:
    # Given jobs claimed under a seed the worker drew, whose reply it never read
    variant = Variant(conn, name)
    variant.enqueue(3, now=at(0))
    seed = os.urandom(16)
    claimed = variant.store.claim(
        queues=variant.queues, limit=10, lease_seconds=LEASE, now=at(1), seed=seed
    )
    assert len(claimed) == 3
    assert {job.lease_token for job in claimed} == {
        transitions.lease_token(seed, job.id) for job in claimed
    }

    # When the seed looks for them (with another worker's seed beside it)
    found = variant.store.recover_claimed(
        [os.urandom(16), seed], lease_seconds=LEASE, now=at(20)
    ).jobs()

    # Then they come back as claimed: same tokens and attempts, the lease renewed
    assert sorted(job.id for job in found) == sorted(job.id for job in claimed)
    for job in found:
        assert job.status is Status.RUNNING
        assert job.attempts == 1
        assert job.started_at == at(1)
        assert job.lease_until == at(50)
    assert {job.lease_token for job in found} == {job.lease_token for job in claimed}
    assert [variant.store.get(job.id) for job in found] == found


@pytest.mark.parametrize("name", VARIANTS)
def test_a_seed_does_not_find_a_job_leased_again_since(conn: psycopg.Connection, name: str) -> None:
    # Given jobs claimed under a seed, reclaimed after their lease expired and claimed again
    variant = Variant(conn, name)
    variant.enqueue(2, now=at(0))
    seed = os.urandom(16)
    first = variant.store.claim(
        queues=variant.queues, limit=10, lease_seconds=LEASE, now=at(0), seed=seed
    )
    assert len(variant.store.reclaim(now=at(31))) == 2
    due = max(variant.store.get(job.id).run_after for job in first)
    again = variant.claim(10, due)
    assert sorted(job.id for job in again) == sorted(job.id for job in first)

    # Then the first seed finds nothing, and the second leases are left alone
    assert variant.store.recover_claimed([seed], lease_seconds=LEASE, now=due).jobs() == []
    assert [variant.store.get(job.id) for job in again] == again
    assert [job.attempts for job in again] == [2, 2]


@pytest.mark.parametrize("name", VARIANTS)
def test_without_a_seed_the_database_draws_one(conn: psycopg.Connection, name: str) -> None:
    """SQL callers and older workers pass no seed: every claim still gets fresh tokens."""
    variant = Variant(conn, name)
    variant.enqueue(4, now=at(0))
    first = variant.claim(2, at(1))
    second = variant.claim(2, at(1))
    tokens = {job.lease_token for job in first + second}
    assert len(first + second) == 4 and None not in tokens and len(tokens) == 4


def test_the_lease_functions_keep_their_old_calls(conn: psycopg.Connection) -> None:
    """The seed is a last parameter with a default: SQL written before it still runs."""
    variant = Variant(conn, "plain")
    variant.enqueue(3, now=at(0))
    limited = conn.execute(
        "select count(*) from tickq.claim_limited(array['default'], 1, 30, %s)", (at(1),)
    ).fetchone()
    fair = conn.execute(
        "select count(*) from tickq.claim_fair('default', 1, 30, %s, null)", (at(1),)
    ).fetchone()
    ids = conn.execute("select array_agg(id) from tickq.jobs where status = 'queued'").fetchone()
    leased = conn.execute("select count(*) from tickq.jobs_lease(%s, 30, %s)", (ids[0], at(1)))
    assert (limited, fair, leased.fetchone()) == ((1,), (1,), (1,))


@pytest.mark.parametrize("name", VARIANTS)
def test_a_paused_queue_is_left_out_of_every_claim_variant(
    conn: psycopg.Connection, name: str
) -> None:
    # Given four jobs in the variant's queues (two groups for the fair claim), and four more
    # of the same type and groups in a queue that is paused
    variant = Variant(conn, name)
    variant.enqueue(4, now=at(0))
    for i in range(4):
        group = f"g{i % 2}" if name == "fair" else None
        variant.store.enqueue(job_spec("t", {"i": i}, queue="held", group=group), now=at(0))
    QueuePauses(conn).pause("held", by="operator")

    # When the variant claims from the paused queue first, then from its own
    jobs = variant.store.claim(
        queues=("held", *variant.queues), limit=10, lease_seconds=LEASE, now=at(5)
    )

    # Then it takes its own queues' jobs and none of the paused queue's
    assert len(jobs) == 4 and {job.queue for job in jobs} == set(variant.queues)
    # And a claim of the paused queue alone takes nothing, until it is resumed
    assert variant.claim_from(("held",), at(5)) == []
    QueuePauses(conn).resume("held")
    assert len(PostgresStore(conn).claim(queues=("held",), limit=10, now=at(6))) == 4


@pytest.mark.parametrize("later", [False, True], ids=["first queue", "later queue"])
def test_a_per_group_cap_of_a_type_counts_its_running_jobs_in_every_queue(
    conn: psycopg.Connection, later: bool
) -> None:
    # Given at most one running job of type "t" per group, and one running in group g0 of
    # queue "a"
    Limits(conn).set_type(type_limit("t", max_running_per_group=1))
    store = PostgresStore(conn)
    store.enqueue(job_spec("t", {}, queue="a", group="g0"), now=at(0))
    (running,) = store.claim(queues=("a",), limit=10, lease_seconds=LEASE, now=at(1))
    # And in queue "b", a job of that type in g0 and one in g1, and one of another type in g0
    for type_, group in (("t", "g0"), ("t", "g1"), ("u", "g0")):
        store.enqueue(job_spec(type_, {}, queue="b", group=group), now=at(2))

    # When queue "b" is claimed (the fair claim; as the first queue of the claim, or after an
    # empty one)
    queues = ("empty", "b") if later else ("b",)
    jobs = store.claim(queues=queues, limit=10, lease_seconds=LEASE, now=at(3))

    # Then g0's job of that type waits for the one running in queue "a"; the others run
    assert sorted((job.type, job.group_key) for job in jobs) == [("t", "g1"), ("u", "g0")]
    # And once that one has finished, it runs
    assert store.finish([transitions.succeeded(running, None)], now=at(4)) == {running.id}
    again = store.claim(queues=queues, limit=10, lease_seconds=LEASE, now=at(5))
    assert [(job.queue, job.type, job.group_key) for job in again] == [("b", "t", "g0")]
