"""Example job handlers, so a freshly deployed stack (or `tickq invoke`) has work it can run.

Point TICKQ_TASK_MODULES at your own modules; these stay harmless if left in.
"""

from __future__ import annotations

from typing import Any

from queue_core import JobContext, PermanentError, task


@task("echo")
def echo(job: JobContext) -> dict[str, Any]:
    """Return the payload: the smallest job that proves the queue runs end to end."""
    return {"echo": job.payload}


@task("fail", max_attempts=1)
def fail(job: JobContext) -> None:
    """Go dead at once, to try dead-letter alerts."""
    raise PermanentError(str(job.payload.get("reason", "failed on purpose")))
