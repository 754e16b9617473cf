"""The handler of the fairness end-to-end tests: holds its slot for payload["sleep"] s."""

from __future__ import annotations

import time

from queue_core import JobContext, task


@task("acc")
def acc(job: JobContext) -> None:
    time.sleep(float(job.payload.get("sleep", 0)))
