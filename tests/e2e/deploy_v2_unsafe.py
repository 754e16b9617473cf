"""An unsafe version 2 of `e2e-deploy`: its first step renamed, which a job suspended under
version 1 cannot replay."""

from __future__ import annotations

from typing import Any

from queue_core import JobContext, task
from tests.e2e.deploy_runs import ran


@task("e2e-deploy")
def deploy(job: JobContext) -> Any:
    doc = job.step("download", lambda: ran(job, "download", "doc"))
    job.wait_for("approve")
    return job.step("store", lambda: ran(job, "store", f"stored {doc}"))
