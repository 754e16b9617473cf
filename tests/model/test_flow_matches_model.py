"""Flow limits: the claim on PostgreSQL and the pure model (queue_core.model.flow.admit) agree.

Hypothesis draws limits per key prefix (a cap per key, a rate per key, or both, prefixes
nested so the longest one must govern), maybe a hold, jobs with up to two keys each, and a
run of claims and finishes at increasing times. Each claim must lease exactly the jobs the
model admits (the first `limit` of the runnable jobs, in claim order, that their keys let
start), so caps per key, rate windows (a start exactly one period ago is out of the window),
holds and the longest-prefix rule are all held to one definition. Run against the plain
claim and the limited one (tickq.claim_limited), which share the claim order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from queue_core.model import flow
from queue_core.model.jobs import Outcome, Status
from queue_core.model.validation import job_spec
from queue_core.policies.flow_limits import FlowLimits
from queue_core.policies.limits import Limits, type_limit
from tests.model.profiles import budget
from tests.model.stores import deterministic_store, empty

T0 = datetime(2030, 1, 1, tzinfo=UTC)
KEYS = ("a:x1", "a:x2", "a:y", "b:1", "c")
PREFIXES = ("a:", "a:x", "b:")


@dataclass(frozen=True)
class Claim:
    at: float
    limit: int


@dataclass(frozen=True)
class Finish:
    at: float
    nth: int  # which running job (by claim order) ends


@dataclass
class Scenario:
    limits: list[flow.FlowLimit]
    hold: tuple[str, float] | None  # key, seconds from T0
    jobs: list[tuple[str, ...]]
    events: list[Claim | Finish] = field(default_factory=list)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    limits = []
    for prefix in draw(st.lists(st.sampled_from(PREFIXES), min_size=1, max_size=3, unique=True)):
        cap = draw(st.none() | st.integers(1, 3))
        rate = draw(st.none() | st.tuples(st.integers(1, 3), st.sampled_from([5.0, 10.0])))
        if cap is None and rate is None:
            cap = 1
        limits.append(flow.flow_limit(prefix, max_running=cap, rate=rate))
    hold = draw(st.none() | st.tuples(st.sampled_from(KEYS), st.sampled_from([3.0, 12.0])))
    jobs = draw(
        st.lists(
            st.lists(st.sampled_from(KEYS), max_size=2, unique=True).map(tuple),
            min_size=1,
            max_size=14,
        )
    )
    events: list[Claim | Finish] = []
    now = 0.0
    for kind in draw(st.lists(st.booleans(), min_size=1, max_size=10)):
        # Whole seconds and exact period boundaries are likely: off-by-one rates show there.
        now += draw(st.sampled_from([0.0, 1.0, 2.5, 5.0, 10.0]))
        if kind:
            events.append(Claim(now, draw(st.integers(1, 6))))
        else:
            events.append(Finish(now, draw(st.integers(0, 5))))
    return Scenario(limits, hold, jobs, events)


def run_model(s: Scenario) -> list[list[int]]:
    """The job indexes each claim leases, by the model."""
    running: list[int] = []
    starts: dict[str, list[datetime]] = {}
    holds = {} if s.hold is None else {s.hold[0]: at(s.hold[1])}
    waiting = list(range(len(s.jobs)))
    out = []
    for event in s.events:
        if isinstance(event, Finish):
            if running:
                running.pop(event.nth % len(running))
            continue
        now = at(event.at)
        counts: dict[str, int] = {}
        for index in running:
            for k in s.jobs[index]:
                counts[k] = counts.get(k, 0) + 1
        admitted = flow.admit(
            [(i, s.jobs[i]) for i in waiting],
            limits=s.limits,
            running=counts,
            starts=starts,
            holds=holds,
            now=now,
        )[: event.limit]
        for index in admitted:
            waiting.remove(index)
            running.append(index)
            for k in s.jobs[index]:
                starts.setdefault(k, []).append(now)
        running.sort()
        out.append(sorted(admitted))
    return out


def run_on_postgres(conn: psycopg.Connection[Any], s: Scenario, variant: str) -> list[list[int]]:
    if variant == "limited":  # a type limit routes the claim through tickq.claim_limited
        Limits(conn).set_type(type_limit("t", max_running=1000))
    limits = FlowLimits(conn)
    for limit in s.limits:
        limits.set(limit)
    if s.hold is not None:
        limits.hold(s.hold[0], s.hold[1], now=T0)
    store = deterministic_store(conn)
    index_of: dict[UUID, int] = {}
    for i, keys in enumerate(s.jobs):
        # Runnable before every claim, in index order (claim order: run_after, then created).
        made = store.enqueue(job_spec("t", {"i": i}, flow_keys=list(keys)), now=at(-60 + i))
        index_of[made.id] = i
    running: list[tuple[int, UUID, UUID]] = []
    out = []
    for event in s.events:
        if isinstance(event, Finish):
            if running:
                _, job_id, token = running.pop(event.nth % len(running))
                store.finish([Outcome(job_id, token, Status.SUCCEEDED)], now=at(event.at))
            continue
        claimed = store.claim(limit=event.limit, now=at(event.at))
        for job in claimed:
            assert job.lease_token is not None
            running.append((index_of[job.id], job.id, job.lease_token))
        running.sort()
        out.append(sorted(index_of[job.id] for job in claimed))
    return out


# Always among the examples: a rate's window edge (a start exactly one period ago no longer
# counts), a cap per key under a shorter prefix's looser cap, and a hold that lapses.
RATE_EDGE = Scenario(
    [flow.flow_limit("a:", rate=(2, 5.0))],
    None,
    [("a:x1",)] * 5,
    [Claim(0, 6), Claim(4.0, 6), Claim(5.0, 6), Claim(10.0, 6)],
)
NESTED_CAPS = Scenario(
    [flow.flow_limit("a:", max_running=3), flow.flow_limit("a:x", max_running=1)],
    None,
    [("a:x1",), ("a:x1",), ("a:y",), ("a:y",), ("a:x2",)],
    [Claim(0, 6), Finish(1, 0), Claim(2, 6)],
)
HOLD_LAPSES = Scenario(
    [flow.flow_limit("b:", max_running=2)],
    ("c", 3.0),
    [("c",), ("b:1", "c"), ("b:1",)],
    [Claim(0, 6), Claim(2.5, 6), Claim(3.0, 6)],
)


@pytest.mark.parametrize("variant", ["plain", "limited"])
def test_claims_under_flow_limits_lease_the_models_jobs(database_url: str, variant: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:

        @budget(ci=40, long=800)
        @given(scenarios())
        @example(RATE_EDGE)
        @example(NESTED_CAPS)
        @example(HOLD_LAPSES)
        def check(s: Scenario) -> None:
            empty(conn)
            assert run_on_postgres(conn, s, variant) == run_model(s)

        check()
