"""The limits of one AWS call fit the seconds its caller may spend."""

from __future__ import annotations

import pytest

from tickq.functions.aws import MAX_ATTEMPTS, CallLimits


def test_no_deadline_gets_the_default_limits() -> None:
    assert CallLimits.within(None) == CallLimits()


def test_plenty_of_time_gets_the_default_limits_too() -> None:
    assert CallLimits.within(600) == CallLimits()


@pytest.mark.parametrize("seconds", [0.6, 1.0, 1.9, 2.0, 3.5, 7.0, 14.9])
def test_a_short_budget_shrinks_the_limits_to_fit_in_it(seconds: float) -> None:
    limits = CallLimits.within(seconds)

    assert limits is not None
    assert limits.worst_seconds <= seconds
    assert 1 <= limits.attempts <= MAX_ATTEMPTS and limits.connect > 0 and limits.read > 0


def test_a_budget_too_short_for_one_attempt_makes_no_call() -> None:
    assert CallLimits.within(0.4) is None
    assert CallLimits.within(0.0) is None


def test_the_config_uses_standard_retries_with_the_total_attempts() -> None:
    config = CallLimits(connect=1.0, read=2.0, attempts=1).config()

    assert (config.connect_timeout, config.read_timeout) == (1.0, 2.0)
    assert config.retries == {"mode": "standard", "total_max_attempts": 1}
