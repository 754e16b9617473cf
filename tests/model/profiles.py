"""Hypothesis budgets: bounded for CI, larger with TICKQ_HYPOTHESIS_PROFILE=long.

Under CI (CI=true) every property is derandomized: the same examples run on every run, so
a failure is never a coin toss and the run after it reproduces it. Everywhere, a failure
prints the falsifying example and the blob that replays it (`@reproduce_failure`).
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, Phase, settings

PROFILE = os.environ.get("TICKQ_HYPOTHESIS_PROFILE", "ci")
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
# TICKQ_HYPOTHESIS_SHRINK=0 reports a failure as found, unshrunk: the mutation runner only
# needs to know that a proof failed, and shrinking a database-backed failure takes minutes.
PHASES = (
    tuple(Phase)
    if os.environ.get("TICKQ_HYPOTHESIS_SHRINK", "1") != "0"
    else (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)
)

if IN_CI:
    settings.register_profile(
        "tickq", derandomize=True, database=None, print_blob=True, phases=PHASES
    )
else:
    settings.register_profile("tickq", print_blob=True, phases=PHASES)
settings.load_profile("tickq")


def budget(*, ci: int, long: int, steps: int | None = None) -> settings:
    """Settings for database-backed properties: no deadline (the machine is shared and
    noisy), no too-slow health check, and an example count chosen by the profile."""
    if PROFILE not in ("ci", "long"):
        raise ValueError(f"TICKQ_HYPOTHESIS_PROFILE must be ci or long, got {PROFILE!r}")
    extra: dict[str, Any] = {} if steps is None else {"stateful_step_count": steps}
    return settings(
        max_examples=ci if PROFILE == "ci" else long,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        derandomize=IN_CI,
        print_blob=True,
        phases=PHASES,
        **extra,
    )
