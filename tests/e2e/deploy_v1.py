"""Version 1 of the `e2e-deploy` handler (tests/e2e/test_deploys_done_when.py): fetch, wait
for approval, store. Every step's fn appends "<job id> <name>" to $TICKQ_STEP_RUNS."""

from __future__ import annotations

from typing import Any

from queue_core import JobContext, task
from tests.e2e.deploy_runs import ran


@task("e2e-deploy")
def deploy(job: JobContext) -> Any:
    doc = job.step("fetch", lambda: ran(job, "fetch", "doc"))
    job.wait_for("approve")
    return job.step("store", lambda: ran(job, "store", f"stored {doc}"))
