"""Handlers for the connection-fault tests, run inside a `tickq work` process.

`count` appends its job's id to the file named by TICKQ_FAULT_LOG, one line per execution,
outside the engine and any transaction: whatever the engine believes it ran, this file
says how many times a handler really started.
"""

from __future__ import annotations

import os
import time

from queue_core import JobContext, task


@task("count")
def count(job: JobContext) -> None:
    with open(os.environ["TICKQ_FAULT_LOG"], "a", encoding="utf-8") as log:
        log.write(f"{job.id}\n")
    time.sleep(float(os.environ.get("TICKQ_FAULT_HANDLER_SECONDS", "0")))
