"""The pure model of debounce and throttle, and the checks on a request's gate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from queue_core import ConfigurationError, Debounce, InvalidJob, Throttle
from queue_core.model import gates
from queue_core.model.gates import Claim, Enqueue, GatedJob
from queue_core.model.validation import job_spec
from queue_core.store.memory import MemoryStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_debounced_burst_is_one_job_run_seconds_after_the_last_enqueue() -> None:
    events = [Enqueue(at(0)), Enqueue(at(5)), Enqueue(at(9))]
    assert gates.model(Debounce("k", 10), events) == [GatedJob(at(19), 3)]


def test_a_debounce_never_runs_later_than_its_bound_after_the_first_enqueue() -> None:
    events = [Enqueue(at(t)) for t in range(0, 100, 5)]
    assert gates.model(Debounce("k", 10, 30), events) == [GatedJob(at(30), 20)]


def test_a_started_debounced_job_makes_the_next_enqueue_a_new_job() -> None:
    events = [Enqueue(at(0)), Claim(at(5)), Claim(at(10)), Enqueue(at(11))]
    assert gates.model(Debounce("k", 10), events) == [GatedJob(at(10), 1), GatedJob(at(21), 1)]


def test_a_throttle_makes_one_job_per_window_from_the_last_job_created() -> None:
    events = [Enqueue(at(0)), Enqueue(at(59)), Claim(at(1)), Enqueue(at(60)), Enqueue(at(100))]
    assert gates.model(Throttle("k", 60), events) == [GatedJob(at(0), 2), GatedJob(at(60), 2)]


def test_a_gate_given_as_an_object_is_the_value() -> None:
    spec = job_spec("t", debounce={"key": "k", "seconds": 5, "max_seconds": 50})
    assert spec.gate == Debounce("k", 5.0, 50.0)
    assert job_spec("t", throttle={"key": "k", "seconds": 2}).gate == Throttle("k", 2.0)
    assert job_spec("t").gate is None


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"debounce": Throttle("k", 5)}, "debounce"),
        ({"debounce": {"key": "k", "seconds": 5, "extra": 1}}, "debounce"),
        ({"debounce": {"key": "", "seconds": 5}}, "debounce.key"),
        ({"debounce": {"key": "k", "seconds": float("nan")}}, "debounce.seconds"),
        ({"debounce": "k:5"}, "debounce"),
        ({"throttle": Throttle("k", 5), "run_after": None, "idempotency_key": "x"}, "throttle"),
    ],
)
def test_a_malformed_gate_is_refused(options: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidJob) as refused:
        job_spec("t", **options)  # type: ignore[arg-type]
    assert refused.value.field == field


def test_a_throttle_may_run_later() -> None:
    spec = job_spec("t", throttle=Throttle("k", 5), delay=30)
    assert (spec.gate, spec.delay) == (Throttle("k", 5), 30.0)


def test_the_in_memory_store_refuses_a_gate_and_keeps_nothing() -> None:
    store = MemoryStore()
    with pytest.raises(ConfigurationError):
        store.enqueue(job_spec("t", debounce=Debounce("k", 5)))
    assert store.list_jobs().jobs == []
