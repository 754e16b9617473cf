"""Handlers for the runs through the pooler: one that does nothing, one that notes its
attempt in a side table through the worker's own transaction-pooled connection."""

from __future__ import annotations

from typing import Any

from queue_core import task


@task("pooled")
def pooled(job: Any) -> dict[str, int]:
    return {"n": int(job.payload.get("n", 0))}
