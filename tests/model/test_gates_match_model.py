"""Debounce and throttle: PostgreSQL and the pure model (queue_core.model.gates.model) agree.

Hypothesis draws a gate (seconds, a bound or none) and a sequence of enqueues of one key at
random times, with claims in between (a worker starting whatever is runnable then); the
store runs them on a real database with those explicit times, and the jobs it made (their
run times and the enqueues each one took, in order) must be the model's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from hypothesis import example, given
from hypothesis import strategies as st

from queue_core.model import gates
from queue_core.model.validation import job_spec
from tests.model.profiles import budget
from tests.model.stores import deterministic_store, empty

T0 = datetime(2030, 1, 1, tzinfo=UTC)
# Steps of whole milliseconds: PostgreSQL keeps microseconds, so times compare exactly.
steps = st.integers(min_value=0, max_value=40_000).map(lambda ms: timedelta(milliseconds=ms))
seconds = st.integers(min_value=1, max_value=30)


@st.composite
def gate_and_events(draw: st.DrawFn) -> tuple[gates.Gate, list[gates.Event]]:
    if draw(st.booleans()):
        wait = draw(seconds)
        bound = draw(st.none() | st.integers(min_value=wait, max_value=60))
        gate: gates.Gate = gates.Debounce("k", wait, bound)
    else:
        gate = gates.Throttle("k", draw(seconds))
    at = T0
    events: list[gates.Event] = []
    for claim in draw(st.lists(st.booleans(), min_size=1, max_size=12)):
        at += draw(steps)
        events.append(gates.Claim(at) if claim else gates.Enqueue(at))
    return gate, events


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# Always among the examples: a burst past its bound, and an enqueue after the job started.
BOUNDED_BURST = (gates.Debounce("k", 10, 25), [gates.Enqueue(at(t)) for t in range(0, 40, 8)])
STARTED_THEN_AGAIN = (
    gates.Debounce("k", 5),
    [gates.Enqueue(at(0)), gates.Claim(at(5)), gates.Enqueue(at(6)), gates.Claim(at(20))],
)


def run_on_postgres(
    conn: psycopg.Connection[Any], gate: gates.Gate, events: list[gates.Event]
) -> list[gates.GatedJob]:
    store = deterministic_store(conn)
    made: list[Any] = []
    for event in events:
        if isinstance(event, gates.Claim):
            store.claim(limit=10, now=event.at)
            continue
        result = store.enqueue(job_spec("t", **{gate.kind: gate}), now=event.at)
        if result.id not in made:
            made.append(result.id)
    out = []
    for job_id in made:
        job, view = store.get(job_id), store.gate_of(job_id)
        assert view is not None
        out.append(gates.GatedJob(job.run_after, view.enqueues))
    return out


def test_random_enqueues_of_one_key_make_the_models_jobs(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:

        @budget(ci=30, long=600)
        @given(gate_and_events())
        @example(BOUNDED_BURST)
        @example(STARTED_THEN_AGAIN)
        def check(drawn: tuple[gates.Gate, list[gates.Event]]) -> None:
            gate, events = drawn
            empty(conn, "tickq.jobs, tickq.job_gates")
            assert run_on_postgres(conn, gate, events) == gates.model(gate, events)

        check()
