"""Hypothesis budgets: bounded for CI, larger with TICKQ_HYPOTHESIS_PROFILE=long."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("TICKQ_HYPOTHESIS_PROFILE", "ci")


def budget(*, ci: int, long: int, steps: int | None = None) -> settings:
    """Settings for database-backed properties: no deadline (the machine is shared and
    noisy), no too-slow health check, and an example count chosen by the profile."""
    if PROFILE not in ("ci", "long"):
        raise ValueError(f"TICKQ_HYPOTHESIS_PROFILE must be ci or long, got {PROFILE!r}")
    extra = {} if steps is None else {"stateful_step_count": steps}
    return settings(
        max_examples=ci if PROFILE == "ci" else long,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        **extra,
    )
