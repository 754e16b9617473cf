"""The retry schedule: a pure function of the attempt number."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queue_core.model.backoff import Backoff


def test_default_schedule_doubles_from_one_second_and_caps_at_five_minutes() -> None:
    delays = [Backoff().delay(attempt) for attempt in range(1, 12)]

    assert delays == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]


def test_attempts_below_one_wait_the_base_delay() -> None:
    assert Backoff().delay(0) == 1
    assert Backoff().delay(-5) == 1


def test_configured_base_factor_and_max_shape_the_schedule() -> None:
    policy = Backoff(base=5, factor=3, max=100)

    assert [policy.delay(a) for a in range(1, 5)] == [5, 15, 45, 100]


@pytest.mark.parametrize("attempt", [64, 65, 66, 1_000, 10**9, 2**63])
def test_huge_attempt_numbers_wait_the_maximum_without_overflowing(attempt: int) -> None:
    policy = Backoff(base=1, factor=100, max=7 * 86_400)

    delay = policy.delay(attempt)

    assert delay == 7 * 86_400
    assert math.isfinite(delay)


def test_without_jitter_the_random_draw_changes_nothing() -> None:
    assert Backoff().delay(4, rand=0.99) == 8


def test_jitter_shortens_the_delay_by_at_most_its_fraction() -> None:
    policy = Backoff(jitter=0.25)

    assert policy.delay(4, rand=0.0) == 8
    assert policy.delay(4, rand=0.5) == 7
    assert policy.delay(4, rand=1.0) == 6


@given(
    attempt=st.integers(min_value=-10, max_value=10**6),
    rand=st.floats(min_value=0, max_value=1, exclude_max=True),
    jitter=st.floats(min_value=0, max_value=1),
)
def test_delay_always_lies_between_the_jittered_floor_and_the_cap(
    attempt: int, rand: float, jitter: float
) -> None:
    policy = Backoff(jitter=jitter)
    raw = Backoff().delay(attempt)

    delay = policy.delay(attempt, rand)

    assert raw * (1 - jitter) - 1e-9 <= delay <= raw <= policy.max


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base": 0},
        {"base": -1},
        {"factor": 0.5},
        {"factor": 101},
        {"base": 10, "max": 5},
        {"max": 8 * 86_400},
        {"jitter": -0.1},
        {"jitter": 1.5},
    ],
)
def test_out_of_range_parameters_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="backoff"):
        Backoff(**kwargs)
