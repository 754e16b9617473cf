"""Durable steps on PostgreSQL: each operation is one named statement of steps.sql, run
on the store's executor (so user scope and error translation are the store's own)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NoReturn
from uuid import UUID

from queue_core.errors import (
    InvalidJob,
    InvalidTransition,
    JobCancelled,
    JobNotFound,
    LeaseLost,
    QueueFull,
)
from queue_core.model import steps, validation
from queue_core.model.ids import new_ids
from queue_core.model.jobs import Job, JobSpec, Status, is_suspended
from queue_core.model.steps import Durable, DurableView, Wait, WaitKind
from queue_core.postgres.enqueue import Enqueues
from queue_core.postgres.reads import Reads, job_uuid

# The parameters of jobs_suspend that count a failed try, for a suspension that counts none.
NO_TRY: dict[str, Any] = {"try_kind": None, "try_name": None, "try_error": None, "try_add": 0}


class StepStore:
    """The durable-step operations of one PostgresStore (its connection and user scope):
    the port's StepOperations."""

    def __init__(self, store: Reads) -> None:
        self.store = store
        self._db = store._db  # the store's executor: its connection and user scope

    def load(
        self,
        job_id: UUID,
        lease_token: UUID,
        *,
        code_version: str | None = None,
        now: datetime | None = None,
    ) -> tuple[Durable, datetime]:
        """The running job's stored steps and signals, and the database clock; LeaseLost
        when the lease is gone. Records the run's code version on the job (same statement)."""
        params = {
            "id": job_id,
            "lease_token": lease_token,
            "code_version": code_version,
            "now": now,
        }
        rows = self._db.rows("job_durable_load", params)
        if not rows:
            raise LeaseLost(job_id)
        resumes, kind, name, until, clock, stored, step_bytes, signals, signal_bytes, tries = rows[
            0
        ]
        state = Durable(
            steps=stored,
            step_bytes=int(step_bytes),
            signals=signals,
            signal_bytes=int(signal_bytes),
            resumes=resumes or 0,
            wait=None if kind is None else Wait(WaitKind(kind), name, until),
            tries=tries,
        )
        return state, clock

    def complete(
        self,
        job_id: UUID,
        lease_token: UUID,
        name: str,
        result_json: str,
        *,
        compensable: bool = False,
        code_version: str | None = None,
        now: datetime | None = None,
    ) -> datetime:
        """Store a step's result (committed on an autocommit connection), marked
        compensable when it has an undo; LeaseLost when another attempt holds the job."""
        params = {
            "id": job_id,
            "lease_token": lease_token,
            "name": name,
            "result": result_json,
            "size": len(result_json.encode()),
            "compensable": compensable,
            "code_version": code_version,
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
        code_version: str | None = None,
        now: datetime | None = None,
        tried: dict[str, Any] | None = None,
    ) -> datetime:
        """Send the job back to the queue until `until` (or `delay` seconds from now);
        returns when it may run again. JobCancelled when someone asked it to cancel,
        LeaseLost when the lease is gone. `tried`: a failed try counted in the same
        statement (step_failed)."""
        params = {
            "id": job_id,
            "lease_token": lease_token,
            "wait_kind": kind.value,
            "wait_name": name,
            "wait_until": until,
            "delay": delay,
            "code_version": code_version,
            "now": now,
            **(tried or NO_TRY),
        }
        rows = self._db.rows("jobs_suspend", params)
        if rows:
            run_after: datetime = rows[0][0]
            return run_after
        self._lost_or_cancelled(job_id, lease_token)

    def signal(
        self, job_id: UUID | str, name: Any, payload: Any = None, *, now: datetime | None = None
    ) -> bool:
        """Keep a named signal for a live job; returns whether it woke the job (suspended
        waiting for it). Refused, with nothing written, for an unknown or finished job, a
        name already sent, or payloads over the job's limit."""
        name = validation.text(name, "signal name", validation.MAX_NAME)
        payload_json = steps.signal_payload(payload)
        if self._db.through_functions():
            # The application login's signal (tickq.signal): refusals raise there.
            params = {"id": job_uuid(job_id), "name": name, "payload": payload_json}
            return bool(self._db.rows("job_signals_send_app", params)[0][0])
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

    def retry(
        self,
        job_id: UUID | str,
        *,
        fresh: bool,
        from_step: str | None = None,
        now: datetime | None = None,
    ) -> Job:
        """Operator retry of a dead or cancelled job: its completed steps are kept (it
        resumes where it failed) but for those its undos undid; `fresh` forgets steps,
        signals and wait, `from_step` the step of that name and every step stored after it,
        in the same transaction as the retry."""
        if fresh and from_step is not None:
            raise InvalidJob("retry", "fresh and from_step exclude each other")
        if self._db.through_functions():
            name = None
            if from_step is not None:
                name = validation.text(from_step, "from_step", validation.MAX_NAME)
            return self.store.retry_as_user(job_id, fresh=fresh, from_step=name)
        with self._db.conn.transaction():
            if fresh:
                self._db.rows("job_durable_clear", {"id": job_uuid(job_id)})
            elif from_step is not None:
                name = validation.text(from_step, "from_step", validation.MAX_NAME)
                params = {"id": job_uuid(job_id), "name": name}
                if not self._db.rows("job_steps_forget_from", params):
                    job = self.store.get(job_id)
                    if job.status not in (Status.DEAD, Status.CANCELLED):
                        raise InvalidTransition(job.id, job.status, "retry")
                    raise InvalidJob("from_step", f"job {job.id} has no step {name!r}")
            else:
                self._db.rows("job_compensation_clear", {"id": job_uuid(job_id)})
            return self.store.retry(job_id, now=now)

    # Durable workflows: step retries, undos, child jobs

    def step_failed(
        self,
        job_id: UUID,
        lease_token: UUID,
        *,
        kind: str,
        name: str,
        error: str,
        delay: float | None,
        add: int = 1,
        now: datetime | None = None,
    ) -> datetime | None:
        """Count a failed try of a step (`add` tries: an undo counted its try before it ran)
        and keep its error; with a `delay`, suspend the job
        until its next try, in one transaction; returns when it runs again (None without a
        delay). LeaseLost when another attempt holds the job."""
        if delay is None:
            self._add_try(job_id, lease_token, kind=kind, name=name, error=error, add=add, now=now)
            return None
        tried = {"try_kind": kind, "try_name": name, "try_error": error, "try_add": add}
        return self.suspend(
            job_id, lease_token, kind=WaitKind.SUSPEND, delay=delay, now=now, tried=tried
        )

    def undo_started(
        self, job_id: UUID, lease_token: UUID, name: str, *, now: datetime | None = None
    ) -> int:
        """Count a try of an undo before it runs (so a crash during it counts); its tries."""
        return self._add_try(
            job_id, lease_token, kind="undo", name=name, error=None, add=1, now=now
        )

    def patch_marked(
        self, job_id: UUID, lease_token: UUID, name: str, *, now: datetime | None = None
    ) -> None:
        """Record job.patched(name)'s marker (a 'patch' try, counting none); LeaseLost when
        the lease is gone."""
        self._add_try(job_id, lease_token, kind="patch", name=name, error=None, add=0, now=now)

    def undo_done(
        self, job_id: UUID, lease_token: UUID, name: str, *, now: datetime | None = None
    ) -> None:
        """Record that an undo ran to the end; LeaseLost when the lease is gone."""
        params = {"id": job_id, "lease_token": lease_token, "name": name, "now": now}
        if not self._db.rows("job_step_tries_done", params):
            raise LeaseLost(job_id)

    def compensation_begin(
        self,
        job_id: UUID,
        lease_token: UUID,
        *,
        ends: Status,
        error: str,
        spare: int,
        now: datetime | None = None,
    ) -> None:
        """Record that the job compensates (the status it ends in, the error that ended it)
        and leave it `spare` attempts for a worker dying during its undos."""
        params = {
            "id": job_id,
            "lease_token": lease_token,
            "ends": ends.value,
            "error": error,
            "spare": spare,
            "now": now,
        }
        if not self._db.rows("jobs_compensation_begin", params):
            raise LeaseLost(job_id)

    def enqueue_children(
        self,
        job_id: UUID,
        lease_token: UUID,
        *,
        step: str,
        specs: Sequence[JobSpec],
        max_running: int,
        queue: str | None = None,
        owner: UUID | None = None,
        now: datetime | None = None,
    ) -> datetime:
        """Enqueue one child job per spec (all of one type) and suspend the parent until they
        have all ended, in one statement; returns the parent's wake time (far off: the last
        child brings it forward). JobCancelled or LeaseLost as `suspend`; QueueFull, writing
        nothing, when `queue` (the parent's) has a maximum depth they would pass, or caps
        each owner's live jobs and they would pass `owner`'s (the parent's: the children
        are its owner's jobs). Where some queue has a limit, the same statement admits them
        first (job_children_enqueue_admitted): no transaction of the store's own, whose
        connection the handlers of a batch share."""
        first = specs[0]
        params = {
            "id": job_id,
            "lease_token": lease_token,
            "step": step,
            "type": first.type,
            "child_ids": new_ids(len(specs)),
            "payloads": [s.payload_json for s in specs],
            "max_running": max_running,
            "max_attempts": first.max_attempts,
            "lease_seconds": first.lease_seconds,
            "timeout_seconds": first.timeout_seconds,
            "backoff_base": first.backoff.base,
            "backoff_factor": first.backoff.factor,
            "backoff_max": first.backoff.max,
            "backoff_jitter": first.backoff.jitter,
            "forever": steps.FOREVER,
            "now": now,
        }
        statement = "job_children_enqueue"
        if isinstance(self.store, Enqueues) and self.store.admits_children(queue):
            statement = "job_children_enqueue_admitted"
            params.update(queue=queue, owner=owner)
        rows = self._db.rows(statement, params)
        refused = rows[0][3:]
        if refused and refused[0] is not None:
            full, depth, limit, of_owner = refused
            raise QueueFull(full, depth, limit, of_owner=of_owner)
        children, _, run_after = rows[0][:3]
        if not children or run_after is None:
            self._lost_or_cancelled(job_id, lease_token)
        woken: datetime = run_after
        return woken

    def children(self, job_id: UUID, step: str) -> list[tuple[UUID, Status, Any, str | None]]:
        """The children of a job's step in the step's order: id, status, result, error."""
        rows = self._db.rows("job_children_results", {"id": job_id, "step": step})
        return [(id_, Status(status), result, error) for id_, status, result, error in rows]

    def _add_try(
        self,
        job_id: UUID,
        lease_token: UUID,
        *,
        kind: str,
        name: str,
        error: str | None,
        add: int,
        now: datetime | None,
    ) -> int:
        params = {
            "id": job_id,
            "lease_token": lease_token,
            "kind": kind,
            "name": name,
            "error": error,
            "add": add,
            "now": now,
        }
        rows = self._db.rows("job_step_tries_add", params)
        if not rows:
            raise LeaseLost(job_id)
        tries: int = rows[0][0]
        return tries

    def _lost_or_cancelled(self, job_id: UUID, lease_token: UUID) -> NoReturn:
        try:
            job = self.store.get(job_id)
        except JobNotFound:
            raise LeaseLost(job_id) from None
        if job.status == Status.RUNNING and job.lease_token == lease_token:
            raise JobCancelled(job_id)
        raise LeaseLost(job_id)


def durable_view(rows: Sequence[Sequence[Any]], job_id: UUID | str) -> DurableView:
    """The durable side of a job from the row of every view's durable statement (the
    owner's and the operator's); JobNotFound when there is none. A wait is shown only while
    the job is suspended (jobs.is_suspended): a finished or failed job waits for nothing."""
    if not rows:
        raise JobNotFound(job_id)
    (
        status,
        resumes,
        kind,
        name,
        until,
        batch_id,
        in_transaction,
        stored,
        signals,
        tries,
        children,
        code_version,
    ) = rows[0]
    waiting = is_suspended(Status(status), kind)
    wait = Wait(WaitKind(kind), name, until) if waiting else None
    # The row counts suspensions (each adds one as it leaves the worker): one still waited
    # on has not resumed yet, so the views count it only once the job is back.
    resumed = max((resumes or 0) - (1 if waiting else 0), 0)
    return DurableView(
        resumed, wait, stored, signals, batch_id, in_transaction, tries, children, code_version
    )
