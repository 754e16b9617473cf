"""Handlers for the runs through the pooler: one that does nothing, one that notes its
attempt in a side table through the worker's own transaction-pooled connection, and a
transactional one whose row commits with its job's success."""

from __future__ import annotations

from typing import Any

from queue_core import task


@task("pooled")
def pooled(job: Any) -> dict[str, int]:
    return {"n": int(job.payload.get("n", 0))}


@task("pooled-tx", transactional=True)
def pooled_tx(job: Any, conn: Any) -> dict[str, int]:
    """Writes its row in the transaction that also succeeds the job."""
    conn.execute("insert into public.pooled_rows values (%s)", (job.id,))
    return {"n": int(job.payload.get("n", 0))}
