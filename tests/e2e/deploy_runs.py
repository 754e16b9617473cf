"""What the `e2e-deploy` versions' steps share: a record of each step's fn that ran."""

from __future__ import annotations

import os
from typing import Any

from queue_core import JobContext


def ran(job: JobContext, name: str, value: Any) -> Any:
    """Append "<job id> <name>" to $TICKQ_STEP_RUNS, so the test counts real runs."""
    with open(os.environ["TICKQ_STEP_RUNS"], "a", encoding="utf-8") as runs:
        runs.write(f"{job.id} {name}\n")
    return value
