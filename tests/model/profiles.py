"""Hypothesis budgets: bounded for CI, larger with TICKQ_HYPOTHESIS_PROFILE=long.

Under CI (CI=true) every property is derandomized: the same examples run on every run, so
a failure is never a coin toss and the run after it reproduces it. Everywhere, a failure
prints the falsifying example and the blob that replays it (`@reproduce_failure`).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("TICKQ_HYPOTHESIS_PROFILE", "ci")
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")

if IN_CI:
    settings.register_profile("tickq", derandomize=True, database=None, print_blob=True)
else:
    settings.register_profile("tickq", print_blob=True)
settings.load_profile("tickq")


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
        derandomize=IN_CI,
        print_blob=True,
        **extra,
    )
