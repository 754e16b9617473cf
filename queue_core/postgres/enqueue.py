"""Enqueue on PostgreSQL: one job, a batch, and jobs that wait for parents.

Each path is one statement per round; a key whose holder commits between an insert and its
lookup makes the request go again, at most ENQUEUE_ROUNDS times. A target queue with a
maximum depth is checked in the insert's transaction (admission).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from operator import attrgetter
from typing import Any
from uuid import UUID

from queue_core import telemetry
from queue_core.errors import DatabaseError, QueueFull, TickqError
from queue_core.model import dependencies, transitions, validation
from queue_core.model.ids import new_id, new_ids
from queue_core.model.job_batch import JobBatch
from queue_core.model.jobs import EnqueueResult, Job, JobSpec, Status
from queue_core.postgres.executor import (
    Executor,
    job_columns_at,
    jobs,
    jobs_and_flags,
    rerun,
    translate_errors,
)
from queue_core.postgres.probes import LimitsProbe
from queue_core.postgres.statements import QUERIES

# A key whose holder commits between an insert and its lookup makes the request go again.
ENQUEUE_ROUNDS = 10
UNSETTLED = f"enqueue did not settle after {ENQUEUE_ROUNDS} rounds of key conflicts"
# The columns jobs_enqueue takes from a batch's base specs (payload and key are per job),
# each sent as one value per job or, when the batch shares it, one value for all.
_BASE_COLUMNS: tuple[tuple[str, Callable[[JobSpec], Any]], ...] = (
    *(
        (column, attrgetter(attribute))
        for column, attribute in (
            ("queue", "queue"),
            ("type", "type"),
            ("user_id", "user_id"),
            ("max_attempts", "max_attempts"),
            ("priority", "priority"),
            ("run_after", "run_after"),
            ("delay", "delay"),
            ("lease_seconds", "lease_seconds"),
            ("timeout_seconds", "timeout_seconds"),
            ("backoff_base", "backoff.base"),
            ("backoff_factor", "backoff.factor"),
            ("backoff_max", "backoff.max"),
            ("backoff_jitter", "backoff.jitter"),
            ("group_key", "group_key"),
        )
    ),
    # A job's flow keys as one text, space-separated (no key holds a space): the statements
    # take one value per job, and an array of arrays must be rectangular.
    ("flow_keys", lambda spec: " ".join(spec.stored_flow_keys)),
)


class Enqueues:
    """The store's enqueue operations, on its executor and its look at the limit tables."""

    _db: Executor
    _limits: LimitsProbe

    def enqueue(self, spec: JobSpec, *, now: datetime | None = None) -> EnqueueResult:
        """Insert one job and return it whole (its row included); a live job holding the
        spec's key is returned instead, as a duplicate; a debounce's or throttle's earlier
        job of the key, when it takes the enqueue, flagged debounced or duplicate."""
        if self._as_user():
            return self._enqueue_as_user([spec], [()], one=True)[0]
        if spec.gate is not None:
            return self._enqueue_gated(spec, now)
        with self._admission((spec,)):
            for _ in range(ENQUEUE_ROUNDS):
                found = self._enqueue_one(spec, _one_job_params(spec, now))
                if found is not None:
                    return found
        raise DatabaseError(UNSETTLED)

    def _enqueue_gated(self, spec: JobSpec, now: datetime | None) -> EnqueueResult:
        """Ask the key's gate (tickq.job_gate) which job the enqueue lands on, and insert it
        when it is a new one: one transaction, so the gate's lock on the key covers both. Only
        a new job is admitted to a queue with a maximum depth: one that lands on an earlier
        job adds none."""
        gate = spec.gate
        assert gate is not None
        params = _one_job_params(spec, now)
        with self._db.atomic(), telemetry.recording(self._db.conn):
            gated = {
                "kind": gate.kind,
                "key": gate.key,
                "user_id": spec.user_id,
                "seconds": gate.seconds,
                "max_seconds": gate.max_seconds,
                "payload": spec.payload_json,
                "now": now,
                "id": params["id"],
            }
            ((job_id, outcome, run_after),) = self._db.rows("jobs_gate", gated)
            if outcome != "created":
                (job,) = self._db.rows("jobs_get", {"id": job_id}, jobs)
                return EnqueueResult(
                    job.id, job.status, outcome == "throttled", job, outcome == "debounced"
                )
            if run_after is not None:
                params["run_after"] = run_after
            if self._admits_here():
                self._admit((spec,))
            found = self._enqueue_one(spec, params)
        assert found is not None  # a gated job has no idempotency key to wait for
        return found

    def enqueue_many(
        self, specs: Sequence[JobSpec], *, now: datetime | None = None
    ) -> list[EnqueueResult]:
        """Insert all specs in one statement; a spec whose key a live job holds gets that job.

        Results carry no rows (bulk callers map ids; reading rows back costs more than the
        insert). Specs repeating a key within the batch resolve to the first one's job.
        """
        return self.enqueue_batch(JobBatch.of(specs), now=now) if specs else []

    def enqueue_batch(self, batch: JobBatch, *, now: datetime | None = None) -> list[EnqueueResult]:
        """enqueue_many for a batch as Registry.batch validates it."""
        if not len(batch):
            return []
        if self._as_user():
            return self._enqueue_as_user(batch.specs(), [()] * len(batch))
        if any(map(attrgetter("gate"), batch.bases)):
            # Gated jobs go one by one, in order: a later request of a key lands on the job
            # an earlier one of the batch made.
            with self._db.atomic():
                return [replace(self.enqueue(spec, now=now), job=None) for spec in batch.specs()]
        with self._admission(batch.bases):
            return self._enqueue_batch(batch, now)

    def enqueue_after(
        self,
        batch: JobBatch,
        after: Sequence[Sequence[dependencies.ParentRef]],
        *,
        now: datetime | None = None,
    ) -> list[EnqueueResult]:
        """Enqueue jobs that wait for parents: `after[i]` names job i's parents, existing
        job ids or positions of earlier jobs of the batch. All or nothing, in the caller's
        transaction when it has one: a bad parent (InvalidParent) writes nothing."""
        validation.no_gate_after(batch.bases)
        if not len(batch):
            return []
        if self._as_user():
            return self._enqueue_as_user(batch.specs(), after)
        # Again when a parent moved between partitions under it.
        return rerun(self._db.conn, lambda: self._enqueue_after_once(batch, after, now))

    def _enqueue_after_once(
        self,
        batch: JobBatch,
        after: Sequence[Sequence[dependencies.ParentRef]],
        now: datetime | None,
    ) -> list[EnqueueResult]:
        with self._admission(batch.bases), self._db.atomic():
            if not dependencies.is_sequential(batch.keys, after):
                return self._enqueue_linked(batch, after, now, ENQUEUE_ROUNDS)
            results: list[EnqueueResult | None] = []
            for index in range(len(batch)):
                named = dependencies.resolve(after[index], results)
                results += self._enqueue_linked(batch.take([index]), [named], now, ENQUEUE_ROUNDS)
            return [r for r in results if r is not None]

    def _enqueue_linked(
        self,
        batch: JobBatch,
        after: Sequence[Sequence[dependencies.ParentRef]],
        now: datetime | None,
        rounds: int,
    ) -> list[EnqueueResult]:
        """Lock the existing parents, decide (dependencies.plan), insert jobs and edges."""
        ids = new_ids(len(batch))
        named = sorted({ref for refs in after for ref in refs if isinstance(ref, UUID)})
        found: dict[UUID, dependencies.ParentRow] = {}
        if named:
            for id_, status, user_id in self._db.rows("jobs_parents_lock", {"ids": named}):
                found[id_] = dependencies.ParentRow(Status(status), user_id)
        plan = dependencies.plan(ids, batch.user_ids(), after, found)
        params: dict[str, Any] = {
            "now": now,
            "id": ids,
            "payload": batch.payloads,
            "idempotency_key": batch.keys,
            "status": [s.value for s in plan.statuses],
            "pending_parents": plan.pending,
            "has_children": plan.has_children,
            "child_ids": plan.child_ids,
            "parent_ids": plan.parent_ids,
            "counted": plan.counted,
            "earlier_parents": plan.earlier_parents,
        }
        for column, value_of in _BASE_COLUMNS:
            params[column] = list(map(value_of, batch.bases))
        refused = {row[0]: row for row in self._db.rows("jobs_enqueue_after", params)}
        results: list[EnqueueResult | None] = []
        for id_, status in zip(ids, plan.statuses, strict=True):
            row = refused.get(id_)
            if row is None:
                results.append(EnqueueResult(id_, status, False))
            elif row[1] is None:
                results.append(None)  # the key's holder committed after this statement began
            else:
                results.append(EnqueueResult(row[1], Status(row[2]), True))
        for index, result in enumerate(results):
            if result is None:
                if rounds <= 1:
                    raise DatabaseError(UNSETTLED)
                parents = dependencies.resolve(after[index], results)
                results[index] = self._enqueue_linked(
                    batch.take([index]), [parents], now, rounds - 1
                )[0]
        return [r for r in results if r is not None]

    def _as_user(self) -> bool:
        """Whether this store enqueues through the application login's functions: a user's
        store, or a login that may not write the jobs (read with the limit tables, which an
        enqueue reads anyway)."""
        if self._db.user_id is None:
            self._limits.current()
        return self._db.through_functions()

    def _enqueue_as_user(
        self,
        specs: Sequence[JobSpec],
        after: Sequence[Sequence[dependencies.ParentRef]],
        *,
        one: bool = False,
    ) -> list[EnqueueResult]:
        """An application user's enqueue: through tickq.enqueue_many, the application
        login's only way to add jobs, which takes the owner from the session and the clock
        and the ids from the database, and checks every request again (all or nothing)."""
        owner = self._db.user_id
        if owner is not None and any(spec.user_id != owner for spec in specs):
            # The owner is the session's: a request naming another (or none) is refused,
            # not quietly given to this user.
            raise TickqError("permission denied: a user's store enqueues only that user's jobs")
        requests = "[" + ",".join(map(_request, specs, after)) + "]"
        # One user scope for both statements: a single enqueue reads back the row it landed
        # on by a statement of its own, as the function's insert is not in the snapshot of
        # the statement that called it.
        with translate_errors(), self._db.scope(), _trace_recorded(self._db):
            cur = self._db.thread_cursor()
            cur.execute(QUERIES["jobs_enqueue_many"], {"jobs": requests})
            rows = cur.fetchall()
            results = [_result(id_, Status(status), outcome) for _, id_, status, outcome in rows]
            if one:
                cur.execute(QUERIES["jobs_get"], {"id": results[0].id})
                (job,) = jobs(cur.fetchall(), job_columns_at("jobs_get", cur))
                results[0] = replace(results[0], job=job, status=job.status)
        return results

    @contextmanager
    def _admission(self, specs: Sequence[JobSpec]) -> Iterator[None]:
        """A target queue with a maximum depth is checked in the insert's transaction, under
        a lock on its limit row: QueueFull refuses the whole batch and nothing is written.
        With OpenTelemetry on, the insert records the caller's trace context."""
        if telemetry.active():
            with telemetry.get().recording(self._db.conn):
                yield from self._admitted(specs)
            return
        yield from self._admitted(specs)

    def _admitted(self, specs: Sequence[JobSpec]) -> Iterator[None]:
        if not self._admits_here():
            yield
            return
        with self._db.conn.transaction():
            self._admit(specs)
            yield

    def _admits_here(self) -> bool:
        """Whether this store checks queue depth itself: some queue has a limit, and the
        store is not an application user's (the jobs_app_admit trigger admits those)."""
        return self._db.user_id is None and bool(self._limits.current().queues)

    def admits_children(self, queue: str | None) -> bool:
        """Whether a map step's children, enqueued into `queue` (their parent's), are
        admitted against its limits (its maximum depth, its cap per owner) by this store:
        as `_admits_here`. The statement that enqueues them does it (StepStore), so that the
        admission and the enqueue are one transaction on a connection that the handlers of
        a batch share."""
        return queue is not None and self._admits_here()

    def _admit(self, specs: Sequence[JobSpec]) -> None:
        incoming: dict[str, int] = {}
        for spec in specs:
            incoming[spec.queue] = incoming.get(spec.queue, 0) + 1
        self._admit_counts(incoming)

    def _admit_counts(self, incoming: dict[str, int]) -> None:
        params = {"queues": list(incoming), "counts": list(incoming.values())}
        for queue, depth, max_depth in self._db.rows("queue_limits_admit", params):
            raise QueueFull(queue, depth, max_depth)

    def _enqueue_one(self, spec: JobSpec, params: dict[str, Any]) -> EnqueueResult | None:
        """One round of a single enqueue; None when the key's holder is not visible yet."""
        if spec.idempotency_key is None:
            # Nothing can conflict: the row is the request plus what the database decided.
            with translate_errors(), self._db.scope():
                cur = self._db.thread_cursor()
                cur.execute(QUERIES["jobs_enqueue_one_unkeyed"], params)
                payload, run_after, created_at, priority, group_key = cur.fetchall()[0]
            # The spec, the table's defaults, and what the database stored (a test
            # compares this with the row).
            job = transitions.new_job(
                spec, id=params["id"], now=created_at, payload=payload, run_after=run_after
            )
            if priority != job.priority or group_key != job.group_key:  # an application's
                job = replace(job, priority=priority, group_key=group_key)
            return EnqueueResult(job.id, job.status, False, job)
        # A duplicate's row only the database has: the whole row comes back, in binary,
        # which skips parsing it as text.
        for statement in ("jobs_enqueue_one", "jobs_key_holder"):  # the holder: on a loss
            for job, duplicate in self._db.rows(statement, params, jobs_and_flags, binary=True):
                return EnqueueResult(job.id, job.status, duplicate, job)
        return None

    def _enqueue_batch(self, batch: JobBatch, now: datetime | None) -> list[EnqueueResult]:
        results: list[EnqueueResult | None] = [None] * len(batch)
        pairs = list(zip(batch.keys, batch.user_ids(), strict=True))
        keyed = [pair for pair in pairs if pair[0] is not None]
        first_of_key: dict[tuple[str | None, UUID | None], int] = {}
        if len(set(keyed)) == len(keyed):  # the common case: no key repeats in the batch
            pending = list(range(len(batch)))
        else:
            pending = []
            for index, pair in enumerate(pairs):
                if pair[0] is not None:
                    if pair in first_of_key:
                        continue
                    first_of_key[pair] = index
                pending.append(index)
        # A conflicting insert committed after our statement's snapshot is neither inserted
        # nor visible to it: such jobs come back empty-handed and simply go again.
        for _ in range(ENQUEUE_ROUNDS):
            if not pending:
                break
            pending = self._enqueue_round(batch, pending, results, now)
        if pending:
            raise DatabaseError(UNSETTLED)
        if first_of_key:  # a repeated key gets the job its first request landed on
            for index, pair in enumerate(pairs):
                if results[index] is None:
                    first = results[first_of_key[pair]]
                    assert first is not None
                    results[index] = replace(first, duplicate=True)
        return results  # type: ignore[return-value]  # every slot is filled by now

    def _enqueue_round(
        self,
        batch: JobBatch,
        pending: list[int],
        results: list[EnqueueResult | None],
        now: datetime | None,
    ) -> list[int]:
        """Send the pending jobs once; returns those to send again."""
        sent = batch.take(pending)
        ids = new_ids(len(sent))
        params: dict[str, Any] = {"now": now, "each_id": ids}
        shared = sent.shared_base()
        for column, value_of in _BASE_COLUMNS:
            if shared is not None:
                params[f"each_{column}"], params[f"all_{column}"] = None, value_of(shared)
            else:
                _column(params, column, list(map(value_of, sent.bases)))
        _column(params, "payload", sent.payloads)
        _column(params, "idempotency_key", sent.keys)
        # Keyless batches skip the key table (jobs_enqueue_unkeyed): nothing can conflict.
        keyed = (params["each_idempotency_key"], params["all_idempotency_key"]) != (None, None)
        statement = "jobs_enqueue" if keyed else "jobs_enqueue_unkeyed"
        # Only the ids of the jobs that did not insert come back (their key was held).
        refused = {row[0] for row in self._db.rows(statement, params)}
        if not refused:  # the common case: every job is new
            for index, id_ in zip(pending, ids, strict=True):
                results[index] = EnqueueResult(id_, Status.QUEUED, False)
            return []
        pairs = zip(ids, sent.keys, sent.user_ids(), strict=True)
        holders = self._key_holders([(key, owner) for id_, key, owner in pairs if id_ in refused])
        missing: list[int] = []
        for index, id_, key, owner in zip(pending, ids, sent.keys, sent.user_ids(), strict=True):
            if id_ not in refused:
                results[index] = EnqueueResult(id_, Status.QUEUED, False)
            elif (holder := holders.get((key, owner))) is None:
                missing.append(index)  # not visible yet, or freed meanwhile: send it again
            else:
                results[index] = EnqueueResult(holder[0], Status(holder[1]), True)
        return missing

    def _key_holders(
        self, pairs: list[tuple[str | None, UUID | None]]
    ) -> dict[tuple[str | None, UUID | None], tuple[UUID, str]]:
        """The visible job holding each (key, owner): its id and status."""
        params = {"keys": [key for key, _ in pairs], "owners": [owner for _, owner in pairs]}
        rows = self._db.rows("jobs_key_holders", params)
        return {(key, owner): (id_, status) for key, owner, id_, status in rows}


@contextmanager
def _trace_recorded(db: Executor) -> Iterator[None]:
    """With OpenTelemetry on, the enqueue's transaction records the caller's trace context
    (the jobs' traceparent column reads it)."""
    if telemetry.active():
        with telemetry.get().recording(db.conn):
            yield
        return
    yield


def _request(spec: JobSpec, after: Sequence[dependencies.ParentRef]) -> str:
    """One request of tickq.enqueue_many as JSON text, the payload spliced in as the
    caller's JSON (not parsed again). The owner is the session's, so the spec's is not sent,
    nor its group's owner prefix."""
    request: dict[str, Any] = {
        "type": spec.type,
        "queue": spec.queue,
        "max_attempts": spec.max_attempts,
        "priority": spec.priority,
        "backoff": {
            "base": spec.backoff.base,
            "factor": spec.backoff.factor,
            "max": spec.backoff.max,
            "jitter": spec.backoff.jitter,
        },
    }
    if spec.idempotency_key is not None:
        request["idempotency_key"] = spec.idempotency_key
    if spec.run_after is not None:
        request["run_after"] = spec.run_after.isoformat()
    elif spec.delay:
        request["delay"] = spec.delay
    if spec.lease_seconds is not None:
        request["lease_seconds"] = spec.lease_seconds
    if spec.timeout_seconds is not None:
        request["timeout"] = spec.timeout_seconds
    if spec.flow_keys:
        # The caller's own keys: the function stores them under the session's user, and
        # fills the task's templates from the catalogue itself.
        request["flow_keys"] = list(spec.flow_keys)
    group = spec.group_key
    if spec.user_id is not None:
        owner = str(spec.user_id)
        group = "" if group == owner else group.removeprefix(owner + "/")
    if group:
        request["group"] = group
    if spec.gate is not None:
        gate: dict[str, Any] = {"key": spec.gate.key, "seconds": spec.gate.seconds}
        if spec.gate.max_seconds is not None:
            gate["max_seconds"] = spec.gate.max_seconds
        request[spec.gate.kind] = gate
    if after:
        request["after"] = [ref if isinstance(ref, int) else str(ref) for ref in after]
    text = json.dumps(request, separators=(",", ":"), allow_nan=False)
    return text[:-1] + ',"payload":' + spec.payload_json + "}"


def _result(id_: Any, status: Status, outcome: str, job: Job | None = None) -> EnqueueResult:
    """What tickq.enqueue_many said of one request."""
    return EnqueueResult(
        id_, status, outcome in ("duplicate", "throttled"), job, outcome == "debounced"
    )


def _column(params: dict[str, Any], column: str, values: list[Any]) -> None:
    """A column of jobs_enqueue: its scalar when every job has the same value, else the list."""
    if values.count(values[0]) == len(values):
        params[f"each_{column}"], params[f"all_{column}"] = None, values[0]
    else:
        params[f"each_{column}"], params[f"all_{column}"] = values, None


def _one_job_params(spec: JobSpec, now: datetime | None) -> dict[str, Any]:
    """The parameters of the single-job enqueue statements."""
    return {
        "now": now,
        "id": new_id(),
        "queue": spec.queue,
        "type": spec.type,
        "user_id": spec.user_id,
        "payload": spec.payload_json,
        "key": spec.idempotency_key,
        "max_attempts": spec.max_attempts,
        "priority": spec.priority,
        "run_after": spec.run_after,
        "delay": spec.delay,
        "lease_seconds": spec.lease_seconds,
        "timeout_seconds": spec.timeout_seconds,
        "backoff_base": spec.backoff.base,
        "backoff_factor": spec.backoff.factor,
        "backoff_max": spec.backoff.max,
        "backoff_jitter": spec.backoff.jitter,
        "group_key": spec.group_key,
        "flow_keys": list(spec.stored_flow_keys),
    }
