"""Handlers of the dependency end-to-end test, loaded by `tickq tick` through TICKQ_TASK_MODULES."""

from __future__ import annotations

from typing import Any

from queue_core import JobContext, PermanentError, task


@task("extract")
def extract(job: JobContext) -> dict[str, Any]:
    return {"doc": job.payload.get("doc"), "chunks": 3}


@task("collect")
def collect(job: JobContext) -> dict[str, Any]:
    """Returns what its parents returned, so the test sees what the job saw when it ran."""
    return {"parents": {str(k): v for k, v in job.parent_results.items()}}


@task("explode")
def explode(job: JobContext) -> None:
    raise PermanentError("the document is corrupt")
