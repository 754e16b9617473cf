"""Durable steps on PostgreSQL: each operation is one named statement of sql/steps.sql, run
on the store's executor (so user scope and error translation are the store's own)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from .. import steps, validation
from ..errors import InvalidJob, InvalidTransition, JobCancelled, JobNotFound, LeaseLost
from ..jobs import RUNNABLE, Job, Status
from ..steps import Durable, DurableView, Wait, WaitKind
from .reads import Reads, job_uuid


class StepStore:
    """The durable-step operations of one PostgresStore (its connection and user scope):
    the port's StepOperations."""

    def __init__(self, store: Reads) -> None:
        self.store = store
        self._db = store._db  # the store's executor: its connection and user scope

    def load(
        self, job_id: UUID, lease_token: UUID, *, now: datetime | None = None
    ) -> tuple[Durable, datetime]:
        """The running job's stored steps and signals, and the database clock; LeaseLost
        when the lease is gone."""
        params = {"id": job_id, "lease_token": lease_token, "now": now}
        rows = self._db.rows("job_durable_load", params)
        if not rows:
            raise LeaseLost(job_id)
        resumes, kind, name, until, clock, stored, step_bytes, signals, signal_bytes = rows[0]
        state = Durable(
            steps=stored,
            step_bytes=int(step_bytes),
            signals=signals,
            signal_bytes=int(signal_bytes),
            resumes=resumes or 0,
            wait=None if kind is None else Wait(WaitKind(kind), name, until),
        )
        return state, clock

    def complete(
        self,
        job_id: UUID,
        lease_token: UUID,
        name: str,
        result_json: str,
        *,
        now: datetime | None = None,
    ) -> datetime:
        """Store a step's result (committed on an autocommit connection); LeaseLost when
        another attempt holds the job."""
        params = {
            "id": job_id,
            "lease_token": lease_token,
            "name": name,
            "result": result_json,
            "size": len(result_json.encode()),
            "now": now,
        }
        rows = self._db.rows("job_steps_insert", params)
        if not rows:
            raise LeaseLost(job_id)
        finished: datetime = rows[0][0]
        return finished

    def suspend(
        self,
        job_id: UUID,
        lease_token: UUID,
        *,
        kind: WaitKind,
        name: str | None = None,
        until: datetime | None = None,
        delay: float = 0.0,
        now: datetime | None = None,
    ) -> datetime:
        """Send the job back to the queue until `until` (or `delay` seconds from now);
        returns when it may run again. JobCancelled when someone asked it to cancel,
        LeaseLost when the lease is gone."""
        params = {
            "id": job_id,
            "lease_token": lease_token,
            "wait_kind": kind.value,
            "wait_name": name,
            "wait_until": until,
            "delay": delay,
            "now": now,
        }
        rows = self._db.rows("jobs_suspend", params)
        if rows:
            run_after: datetime = rows[0][0]
            return run_after
        try:
            job = self.store.get(job_id)
        except JobNotFound:
            raise LeaseLost(job_id) from None
        if job.status == Status.RUNNING and job.lease_token == lease_token:
            raise JobCancelled(job_id)
        raise LeaseLost(job_id)

    def signal(
        self, job_id: UUID | str, name: Any, payload: Any = None, *, now: datetime | None = None
    ) -> bool:
        """Keep a named signal for a live job; returns whether it woke the job (suspended
        waiting for it). Refused, with nothing written, for an unknown or finished job, a
        name already sent, or payloads over the job's limit."""
        name = validation.text(name, "signal name", validation.MAX_NAME)
        payload_json = steps.signal_payload(payload)
        size = len(payload_json.encode())
        params = {
            "id": job_uuid(job_id),
            "name": name,
            "payload": payload_json,
            "size": size,
            "max_bytes": steps.MAX_SIGNAL_BYTES,
            "max_signals": steps.MAX_SIGNALS,
            "now": now,
        }
        rows = self._db.rows("job_signals_send", params)
        if not rows:
            raise JobNotFound(job_id)
        status, taken, held, count, kept, woke = rows[0]
        held_bytes = int(held)
        if status in ("succeeded", "dead", "cancelled"):
            raise InvalidTransition(job_id, status, f"signal {name!r} to")
        if not kept and not taken and count >= steps.MAX_SIGNALS:
            raise InvalidJob("signal", f"a job holds at most {steps.MAX_SIGNALS} signals")
        if taken or (not kept and held_bytes + size <= steps.MAX_SIGNAL_BYTES):
            raise InvalidJob("signal", f"{name!r} was already sent to job {job_id}")
        if not kept:
            raise InvalidJob(
                "signal",
                f"the job's signals would hold {held_bytes + size} bytes, "
                f"over the limit of {steps.MAX_SIGNAL_BYTES}",
            )
        return bool(woke)

    def show(self, job_id: UUID | str) -> DurableView:
        return durable_view(self._db.rows("job_durable_show", {"id": job_uuid(job_id)}), job_id)

    def retry(self, job_id: UUID | str, *, fresh: bool, now: datetime | None = None) -> Job:
        """Operator retry of a dead or cancelled job: its completed steps are kept (it
        resumes where it failed) unless `fresh`, which forgets steps, signals and wait in
        the same transaction."""
        if not fresh:
            return self.store.retry(job_id, now=now)
        with self._db.conn.transaction():
            self._db.rows("job_durable_clear", {"id": job_uuid(job_id)})
            return self.store.retry(job_id, now=now)


def durable_view(rows: Sequence[Sequence[Any]], job_id: UUID | str) -> DurableView:
    """The durable side of a job from the row of every view's durable statement (the
    owner's and the operator's); JobNotFound when there is none. A wait is shown only while
    the job is runnable: a finished job waits for nothing."""
    if not rows:
        raise JobNotFound(job_id)
    status, resumes, kind, name, until, batch_id, in_transaction, stored, signals = rows[0]
    waiting = kind is not None and Status(status) in RUNNABLE
    wait = Wait(WaitKind(kind), name, until) if waiting else None
    return DurableView(resumes, wait, stored, signals, batch_id, in_transaction)
