"""A safe version 2 of `e2e-deploy`: an OCR step added before the wait, behind
job.patched, so jobs begun under version 1 keep their path."""

from __future__ import annotations

from typing import Any

from queue_core import JobContext, task
from tests.e2e.deploy_runs import ran


@task("e2e-deploy")
def deploy(job: JobContext) -> Any:
    doc = job.step("fetch", lambda: ran(job, "fetch", "doc"))
    if job.patched("add-ocr"):
        doc = job.step("ocr", lambda: ran(job, "ocr", f"{doc}+ocr"))
    job.wait_for("approve")
    return job.step("store", lambda: ran(job, "store", f"stored {doc}"))
