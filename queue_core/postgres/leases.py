"""What a lease holder and the reclaim do on PostgreSQL: fenced writes by the lease token
while a handler runs, and expired leases taken back."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from queue_core.errors import LeaseLost
from queue_core.model import flow, json_text
from queue_core.model.dependencies import SETTLE_BUDGET
from queue_core.model.jobs import Job
from queue_core.postgres.executor import Executor, jobs
from queue_core.postgres.probes import LimitsProbe
from queue_core.store.port import LeaseState


class Leases:
    """The store's lease operations (the port's LeaseKeeper, and the reclaim)."""

    _db: Executor
    _limits: LimitsProbe

    def reclaim(self, *, limit: int = 1000, now: datetime | None = None) -> list[Job]:
        """Expired leases back to retrying or dead, and ended holds on flow keys deleted
        (up to `limit` of each); returns the jobs as they now stand."""
        return self._db.rows("jobs_reclaim", {"limit": limit, "now": now}, jobs)

    def settle_pending(self, *, rounds: int = 50, now: datetime | None = None) -> int:
        """Work off the children that statements finishing their parents left to settle
        (each statement settles a bounded number), one short transaction of at most
        SETTLE_BUDGET children per round, until none is left or `rounds` ran; the children
        settled."""
        settled = 0
        for _ in range(rounds):
            params = {"budget": SETTLE_BUDGET, "now": now}
            done = self._db.rows("jobs_settle_pending", params)[0][0]
            settled += done
            if not done:
                break
        return settled

    def extend_lease(
        self, job_id: UUID, lease_token: UUID, seconds: float, *, now: datetime | None = None
    ) -> LeaseState:
        params = {"id": job_id, "lease_token": lease_token, "seconds": seconds, "now": now}
        rows = self._db.rows("jobs_extend_lease", params)
        if not rows:
            raise LeaseLost(job_id)
        return LeaseState(rows[0][0], rows[0][1])

    def report_progress(
        self, job_id: UUID, lease_token: UUID, progress: Any, *, now: datetime | None = None
    ) -> bool:
        """Store progress; returns whether someone asked the job to cancel."""
        params = {
            "id": job_id,
            "lease_token": lease_token,
            "progress": json_text.json_value(progress, "progress"),
            "now": now,
        }
        rows = self._db.rows("jobs_report_progress", params)
        if not rows:
            raise LeaseLost(job_id)
        return bool(rows[0][0])

    def hold_flow(self, job_id: UUID, lease_token: UUID, key: str, seconds: float) -> datetime:
        params = {
            "id": job_id,
            "lease_token": lease_token,
            "key": flow.key(key, "key", flow.MAX_STORED_KEY),
            "seconds": flow.hold_seconds(seconds),
            "now": None,
        }
        rows = self._db.rows("flow_hold_fenced", params)
        if not rows:
            raise LeaseLost(job_id)
        self._limits.forget()  # this store's next claim honours the hold at once
        until: datetime = rows[0][1]
        return until

    def parent_results(self, job_id: UUID) -> dict[UUID, Any]:
        """The results of the jobs `job_id` was enqueued after, by parent id."""
        return dict(self._db.rows("job_parent_results", {"id": job_id}))
