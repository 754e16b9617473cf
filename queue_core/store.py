"""The Postgres store: each operation looks up one named statement, executes it, maps rows."""

from __future__ import annotations

import base64
import binascii
import json
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from operator import attrgetter
from typing import Any
from uuid import UUID

import psycopg
import psycopg.errors
from psycopg import pq
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.rows import dict_row

from . import dependencies, transitions, validation
from .batch import JobBatch
from .dependencies import Relative
from .errors import (
    DatabaseError,
    InvalidJob,
    InvalidTransition,
    JobNotFound,
    LeaseLost,
    QueueFull,
    TickqError,
)
from .fairness import GROUPS_TTL_SECONDS, FairState, GroupStats
from .ids import new_id, new_ids
from .jobs import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_QUEUE,
    JOB_COLUMNS,
    EnqueueResult,
    Job,
    JobSpec,
    Outcome,
    Status,
    job_from_row,
)
from .moved_rows import rerun
from .pause_probe import PausedQueues, claimable
from .ports import (
    NO_JOBS,
    ClaimedBatch,
    DerivedOperations,
    JobList,
    LeaseState,
    LimitsConfigured,
    Page,
    StatsRow,
    Store,
)
from .queries import QUERIES

__all__ = ["LeaseState", "LimitsConfigured", "Page", "PostgresStore", "StatsRow"]

MAX_PAGE = 500
# How long a store trusts its last look at the limit tables: a limit set or cleared takes
# effect on running workers within this time, and without limits no statement reads them.
LIMITS_TTL_SECONDS = 5.0
# A key whose holder commits between an insert and its lookup makes the request go again.
ENQUEUE_ROUNDS = 10
UNSETTLED = f"enqueue did not settle after {ENQUEUE_ROUNDS} rounds of key conflicts"
# The columns jobs_enqueue takes from a batch's base specs (payload and key are per job),
# each sent as one value per job or, when the batch shares it, one value for all.
_BASE_COLUMNS = tuple(
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
        ("backoff_base", "backoff.base"),
        ("backoff_factor", "backoff.factor"),
        ("backoff_max", "backoff.max"),
        ("backoff_jitter", "backoff.jitter"),
        ("group_key", "group_key"),
    )
)


class PostgresStore(DerivedOperations):
    """The queue on one psycopg connection: the store port's adapter for PostgreSQL.

    With an autocommit connection each operation is one statement, one round trip, its own
    transaction. With a connection inside the caller's transaction, operations join it.
    `user_id` scopes every operation to that user's rows through row-level security.
    `groups_ttl_seconds` and `rand` tune the fair claim (see queue_core.fairness).
    """

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        *,
        user_id: UUID | None = None,
        groups_ttl_seconds: float = GROUPS_TTL_SECONDS,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.conn = conn
        self.user_id = user_id
        self._limits: tuple[float, LimitsConfigured] | None = None
        self._fair = FairState(groups_ttl_seconds, rand)
        self.paused = PausedQueues()
        self._threads = threading.local()

    @property
    def autocommit(self) -> bool:
        return self.conn.autocommit

    def close(self) -> None:
        self.conn.close()

    # Enqueue

    def enqueue(self, spec: JobSpec, *, now: datetime | None = None) -> EnqueueResult:
        """Insert one job and return it whole (its row included); a live job holding the
        spec's key is returned instead, as a duplicate."""
        with self._admission((spec,)):
            for _ in range(ENQUEUE_ROUNDS):
                found = self._enqueue_one(spec, now)
                if found is not None:
                    return found
        raise DatabaseError(UNSETTLED)

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
        with self._admission(batch.bases):
            return self._enqueue_batch(batch, now)

    def enqueue_after(
        self,
        batch: JobBatch,
        after: Sequence[Sequence[dependencies.ParentRef]],
        *,
        now: datetime | None = None,
    ) -> list[EnqueueResult]:
        """Enqueue jobs that wait for parents (SPEC §9): `after[i]` names job i's parents,
        existing job ids or positions of earlier jobs of the batch. All or nothing, in the
        caller's transaction when it has one: a bad parent (InvalidParent) writes nothing."""
        if not len(batch):
            return []
        # Again when a parent moved between partitions under it (moved_rows).
        return rerun(self.conn, lambda: self._enqueue_after_once(batch, after, now))

    def _enqueue_after_once(
        self,
        batch: JobBatch,
        after: Sequence[Sequence[dependencies.ParentRef]],
        now: datetime | None,
    ) -> list[EnqueueResult]:
        with self._admission(batch.bases), self._atomic():
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
            for id_, status, user_id in self._rows("jobs_parents_lock", {"ids": named}, None):
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
            "earlier_parents": plan.earlier_parents,
        }
        for column, value_of in _BASE_COLUMNS:
            params[column] = list(map(value_of, batch.bases))
        refused = {row[0]: row for row in self._rows("jobs_enqueue_after", params, None)}
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

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        """Several statements as one: a savepoint inside the caller's transaction, a
        transaction of its own on an autocommit connection. A connection that is neither
        (no transaction begun yet) starts the caller's with the first statement."""
        status = self.conn.info.transaction_status
        if not self.conn.autocommit and status == pq.TransactionStatus.IDLE:
            yield
            return
        with translate_errors(), self.conn.transaction():
            yield

    @contextmanager
    def _admission(self, specs: Sequence[JobSpec]) -> Iterator[None]:
        """A target queue with a maximum depth is checked in the insert's transaction, under
        a lock on its limit row: QueueFull refuses the whole batch and nothing is written."""
        if self.user_id is not None or not self.limits_configured().queues:
            # Application users' inserts are admitted by the jobs_app_admit trigger.
            yield
            return
        with self.conn.transaction():
            self._admit(specs)
            yield

    def _admit(self, specs: Sequence[JobSpec]) -> None:
        incoming: dict[str, int] = {}
        for spec in specs:
            incoming[spec.queue] = incoming.get(spec.queue, 0) + 1
        params = {"queues": list(incoming), "counts": list(incoming.values())}
        for queue, depth, max_depth in self._rows("queue_limits_admit", params, None):
            raise QueueFull(queue, depth, max_depth)

    def _enqueue_one(self, spec: JobSpec, now: datetime | None) -> EnqueueResult | None:
        """One round of a single enqueue; None when the key's holder is not visible yet."""
        params = _one_job_params(spec, now)
        if spec.idempotency_key is None:
            # Nothing can conflict: the row is the request plus what the database decided.
            with translate_errors(), self._scope():
                cur = self._enqueue_cursor()
                cur.execute(QUERIES["jobs_enqueue_one_unkeyed"], params)
                payload, run_after, created_at = cur.fetchall()[0]
            # The spec, the table's defaults, and what the database stored (a test
            # compares this with the row).
            job = transitions.new_job(
                spec, id=params["id"], now=created_at, payload=payload, run_after=run_after
            )
            return EnqueueResult(job.id, job.status, False, job)
        # A duplicate's row only the database has: the whole row comes back, in binary,
        # which skips parsing it as text.
        for statement in ("jobs_enqueue_one", "jobs_key_holder"):  # the holder: on a loss
            for job, duplicate in self._rows(statement, params, _jobs_and_flags, binary=True):
                return EnqueueResult(job.id, job.status, duplicate, job)
        return None

    def _enqueue_cursor(self) -> psycopg.Cursor[Any]:
        """This thread's cursor for single enqueues. A kept cursor keeps the adapters it
        looked up for the statement's 16 parameters; a new one looks them all up again, which
        cost a single enqueue a sixth of its client time. One per thread: the store's
        connection may be shared by threads, a cursor may not."""
        cur: psycopg.Cursor[Any] | None = getattr(self._threads, "enqueue_cursor", None)
        if cur is None or cur.closed:
            cur = self._threads.enqueue_cursor = self.conn.cursor()
        return cur

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
        refused = {row[0] for row in self._rows(statement, params, None)}
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
        rows = self._rows("jobs_key_holders", params, None)
        return {(key, owner): (id_, status) for key, owner, id_, status in rows}

    # Worker operations

    def finish_and_claim_unparsed(
        self,
        outcomes: Sequence[Outcome],
        *,
        queues: Sequence[str] = (DEFAULT_QUEUE,),
        limit: int = 10,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        now: datetime | None = None,
    ) -> tuple[set[UUID], ClaimedBatch]:
        """finish_and_claim, leaving the claimed rows unparsed until `jobs()`, so a caller
        can parse them while the connection runs its next statement. Taking turns across
        groups, or under caps per group, the claim is jobs_finish_and_claim_fair; under type
        limits alone, a statement of its own (jobs_claim_limited)."""
        if limit:  # paused queues are left out of the claim (queue_core/pauses.py)
            queues, limit = claimable(queues, limit, self.paused.current(self._paused_queues))
        if limit and self._claims_fairly(queues):
            return self._finish_and_claim_fair(outcomes, queues, limit, lease_seconds, now)
        if limit and self.limits_configured().types:
            held = self.finish(outcomes, now=now)
            params = {
                "queues": list(queues),
                "limit": limit,
                "lease_seconds": lease_seconds,
                "now": now,
            }
            jobs = self._rows("jobs_claim_limited", params, _jobs, binary=True)
            return held, JobList(sorted(jobs, key=transitions.claim_order))
        params = {
            **_outcome_params(outcomes),
            "queue": queues[0] if len(queues) == 1 else None,
            "queues": list(queues),
            "limit": limit,
            "lease_seconds": lease_seconds,
            "now": now,
        }
        statement = "jobs_finish_and_claim" if len(queues) == 1 else "jobs_finish_and_claim_queues"
        if self.user_id is not None:  # its rows must be read inside the user's scope
            rows = self._rows(statement, params, _ids_and_jobs, binary=True)
            jobs = [job for _, job in rows if job is not None]
            return set(rows[0][0] or ()), JobList(sorted(jobs, key=transitions.claim_order))
        with translate_errors():
            # Binary rows: a claim returns whole jobs, and parsing them is its main client cost.
            cur = self._cursor(binary=True)
            try:
                rerun(self.conn, lambda: cur.execute(QUERIES[statement], params))
                first = cur.fetchone()  # the held ids, and the first job or all nulls
            except BaseException:
                cur.close()
                raise
        assert first is not None
        if first[1] is None:
            cur.close()
            return set(first[0] or ()), NO_JOBS
        return set(first[0] or ()), ClaimedRows(cur, first, _job_columns_at(statement, cur))

    def _claims_fairly(self, queues: Sequence[str]) -> bool:
        """Whether the claim must take turns across groups: a cap per group is set, or a
        queue's waiting jobs span more than one group (re-read every GROUPS_TTL_SECONDS).
        Otherwise the plain statements run, unchanged."""
        if self.limits_configured().per_group:
            return True
        for queue in queues:
            mixed = self._fair.mixed_known(queue)
            if mixed is None:
                first, last = self._rows("jobs_groups_span", {"queue": queue}, None)[0]
                mixed = self._fair.remember_mixed(queue, first, last)
            if mixed:
                return True
        return False

    def _finish_and_claim_fair(
        self,
        outcomes: Sequence[Outcome],
        queues: Sequence[str],
        limit: int,
        lease_seconds: int,
        now: datetime | None,
    ) -> tuple[set[UUID], ClaimedBatch]:
        """Persist the outcomes and lease up to `limit` jobs taking turns across groups, in
        one statement for the first queue (jobs_finish_and_claim_fair), then queue by queue
        in the order given; each queue's sweep resumes where this store's last one ended."""
        params = {
            **_outcome_params(outcomes),
            **self._fair_params(queues[0], limit, lease_seconds, now),
        }
        rows = self._rows("jobs_finish_and_claim_fair", params, _ids_and_jobs, binary=True)
        held = set(rows[0][0] or ())
        jobs = [job for _, job in rows if job is not None]
        self._fair.advance(queues[0], jobs)
        for queue in queues[1:]:
            if len(jobs) >= limit:
                break
            params = self._fair_params(queue, limit - len(jobs), lease_seconds, now)
            taken = self._rows("jobs_claim_fair", params, _jobs, binary=True)
            self._fair.advance(queue, taken)
            jobs += taken
        return held, JobList(sorted(jobs, key=transitions.claim_order))

    def _fair_params(
        self, queue: str, limit: int, lease_seconds: int, now: datetime | None
    ) -> dict[str, Any]:
        return {
            "queue": queue,
            "limit": limit,
            "lease_seconds": lease_seconds,
            "now": now,
            "after": self._fair.after.get(queue),
        }

    def reclaim(self, *, limit: int = 1000, now: datetime | None = None) -> list[Job]:
        """Expired leases back to retrying or dead; returns the jobs as they now stand."""
        return self._rows("jobs_reclaim", {"limit": limit, "now": now}, _jobs)

    def extend_lease(
        self, job_id: UUID, lease_token: UUID, seconds: float, *, now: datetime | None = None
    ) -> LeaseState:
        params = {"id": job_id, "lease_token": lease_token, "seconds": seconds, "now": now}
        rows = self._rows("jobs_extend_lease", params, None)
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
            "progress": validation.json_value(progress, "progress"),
            "now": now,
        }
        rows = self._rows("jobs_report_progress", params, None)
        if not rows:
            raise LeaseLost(job_id)
        return bool(rows[0][0])

    # Waking idle workers (long-running workers only; never in a Lambda tick)

    def listen_for_jobs(self) -> bool:
        """Subscribe to enqueue notifications; False (nothing kept) inside a transaction,
        where LISTEN would wait for the caller's commit, or where the subscription does
        not stay with this session."""
        if not self.conn.autocommit:
            return False
        self._rows("jobs_listen", {}, None)
        # Behind a transaction-mode pooler the next statement may run in another server
        # session, one that never listened: then LISTEN cannot wake us.
        if self._rows("jobs_listening", {}, None) == [(True,)]:
            return True
        self._rows("jobs_unlisten", {}, None)
        return False

    def unlisten_jobs(self) -> None:
        self._rows("jobs_unlisten", {}, None)

    def wait_for_jobs(self, timeout: float) -> bool:
        """Block up to `timeout` seconds for an enqueue notification; True if one came.

        Notifications that arrived while other statements ran are returned at once (and all
        consumed), so a job enqueued just after the last claim is never slept through.
        """
        woken = False
        with translate_errors():
            for _ in self.conn.notifies(timeout=max(timeout, 0.0), stop_after=1):
                woken = True
        return woken

    def parent_results(self, job_id: UUID) -> dict[UUID, Any]:
        """The results of the jobs `job_id` was enqueued after, by parent id."""
        return dict(self._rows("job_parent_results", {"id": job_id}, None))

    # Reading and operating

    def relatives(self, job_id: UUID | str) -> list[Relative]:
        """A job's parents, then its children, each with its type and status."""
        rows = self._rows("job_relatives", {"id": _uuid(job_id)}, None)
        return [
            Relative(relation, id_, type_, Status(status)) for relation, id_, type_, status in rows
        ]

    def get(self, job_id: UUID | str) -> Job:
        rows = self._rows("jobs_get", {"id": _uuid(job_id)}, _jobs)
        if not rows:
            raise JobNotFound(job_id)
        return rows[0]

    def list_jobs(
        self,
        *,
        statuses: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        queues: Iterable[str] | None = None,
        user_id: UUID | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        check_page_limit(limit)
        after_created, after_id = decode_cursor(cursor) if cursor else (None, None)
        params = {
            "statuses": _statuses(statuses),
            "types": None if types is None else list(types),
            "queues": None if queues is None else list(queues),
            "user_id": user_id,
            "after_created": after_created,
            "after_id": after_id,
            "limit": limit + 1,
        }
        jobs = self._rows("jobs_list", params, _jobs)
        next_cursor = encode_cursor(jobs[limit - 1]) if len(jobs) > limit else None
        return Page(jobs[:limit], next_cursor)

    def search_jobs(
        self, filters: Mapping[str, Any], *, limit: int = 50, cursor: str | None = None
    ) -> Page:
        """list_jobs with the console's filters (`console.JobFilter.params()`)."""
        check_page_limit(limit)
        after_created, after_id = decode_cursor(cursor) if cursor else (None, None)
        params = {**filters, "after_created": after_created, "after_id": after_id}
        jobs = self._rows("jobs_search", {**params, "limit": limit + 1}, _jobs)
        next_cursor = encode_cursor(jobs[limit - 1]) if len(jobs) > limit else None
        return Page(jobs[:limit], next_cursor)

    def cancel(self, job_id: UUID | str, *, now: datetime | None = None) -> Job:
        rows = self._rows("jobs_cancel", {"ids": [_uuid(job_id)], "now": now}, _jobs)
        if rows:
            return rows[0]
        job = self.get(job_id)
        raise InvalidTransition(job.id, job.status, "cancel")

    def retry(self, job_id: UUID | str, *, now: datetime | None = None) -> Job:
        params = _retry_params(ids=[_uuid(job_id)], statuses=["dead", "cancelled"], now=now)
        rows = self._rows("jobs_retry", params, _jobs)
        if rows:
            return rows[0]
        job = self.get(job_id)
        if job.status in (Status.DEAD, Status.CANCELLED):
            for r in self.relatives(job.id):
                if r.relation == "parent" and r.status != Status.SUCCEEDED:
                    raise InvalidTransition(
                        job.id, job.status, f"retry (its parent {r.id} is {r.status.value})"
                    )
            raise InvalidTransition(
                job.id, job.status, "retry (its idempotency key is held by a live job)"
            )
        raise InvalidTransition(job.id, job.status, "retry")

    def retry_dead(
        self,
        *,
        types: Iterable[str] | None = None,
        queues: Iterable[str] | None = None,
        limit: int = 1000,
        now: datetime | None = None,
    ) -> list[Job]:
        params = _retry_params(
            statuses=["dead"],
            types=None if types is None else list(types),
            queues=None if queues is None else list(queues),
            limit=limit,
            now=now,
        )
        return self._rows("jobs_retry", params, _jobs)

    def has_pending(self, queues: Sequence[str]) -> bool:
        return bool(self._rows("jobs_pending_exist", {"queues": list(queues)}, None)[0][0])

    def stats(self, *, now: datetime | None = None) -> list[StatsRow]:
        rows = self._rows("jobs_stats", {"now": now}, None)
        return [
            StatsRow(q, t, Status(s), c, None if age is None else float(age))
            for q, t, s, c, age in rows
        ]

    def stats_all_users(self, *, now: datetime | None = None) -> list[StatsRow]:
        """`stats` over every user's jobs, for operator views on an application login.

        Counts only, through tickq.operator_stats: the login needs tickq_operator, never
        the worker role, so it can read no row of another user.
        """
        rows = self._rows("operator_stats", {"now": now}, None)
        return [
            StatsRow(q, t, Status(s), c, None if age is None else float(age))
            for q, t, s, c, age in rows
        ]

    def group_stats(self, *, now: datetime | None = None) -> list[GroupStats]:
        """Per queue and fairness group: waiting, running, oldest runnable age."""
        rows = self._rows("jobs_stats_groups", {"now": now}, None)
        return [
            GroupStats(q, g, w, r, None if age is None else float(age)) for q, g, w, r, age in rows
        ]

    def group_stats_all_users(self, *, now: datetime | None = None) -> list[GroupStats]:
        """`group_stats` over every user's jobs, counts only, as `stats_all_users` does."""
        rows = self._rows("operator_group_stats", {"now": now}, None)
        return [
            GroupStats(q, g, w, r, None if age is None else float(age)) for q, g, w, r, age in rows
        ]

    def limits_configured(self) -> LimitsConfigured:
        """Whether any type or queue limit or cap per group exists, re-read every
        LIMITS_TTL_SECONDS."""
        checked = time.monotonic()
        if self._limits is None or checked - self._limits[0] >= LIMITS_TTL_SECONDS:
            types, queues, per_group = self._rows("limits_configured", {}, None)[0]
            configured = LimitsConfigured(bool(types), bool(queues), bool(per_group))
            self._limits = (checked, configured)
        return self._limits[1]

    def _paused_queues(self) -> list[str]:
        return list(self._rows("queue_pauses_probe", {}, None)[0][0])

    def now(self) -> datetime:
        row = self._rows("clock_now", {}, None)[0]
        value: datetime = row[0]
        return value

    # Plumbing

    def _rows(
        self, name: str, params: dict[str, Any], reading: _Reading | None, *, binary: bool = False
    ) -> list[Any]:
        """Run one named statement; `binary` results skip text parsing of uuids and times.
        With `reading`, rows that carry a job come back as what it makes of them. Run again
        when it met a job that another transaction moved between partitions (moved_rows)."""
        return rerun(self.conn, lambda: self._rows_once(name, params, reading, binary))

    def _rows_once(
        self, name: str, params: dict[str, Any], reading: _Reading | None, binary: bool
    ) -> list[Any]:
        query = QUERIES[name]
        with translate_errors(), self._scope(), self._cursor(binary=binary) as cur:
            cur.execute(query, params)
            # The result status, not cur.description: describing a whole job row builds
            # a Column per field, which costs more than a one-row statement's parsing.
            result = cur.pgresult
            if result is None or result.status != pq.ExecStatus.TUPLES_OK:
                return []
            rows = cur.fetchall()
            if reading is None or not rows:
                return rows
            return reading(rows, _job_columns_at(name, cur))

    def _cursor(self, *, binary: bool) -> psycopg.Cursor[Any]:
        """A cursor of this store's connection; binary ones load jsonb with the fast loader."""
        cur = self.conn.cursor(binary=binary)
        if binary:
            cur.adapters.register_loader("jsonb", _JsonbBinaryLoader)
        return cur

    @contextmanager
    def _scope(self) -> Iterator[None]:
        if self.user_id is None:
            yield
            return
        with self.conn.transaction():
            self.conn.execute(QUERIES["user_scope"], {"user_id": str(self.user_id)})
            yield


QUEUE_FULL_SQLSTATE = "TQ429"


@contextmanager
def translate_errors() -> Iterator[None]:
    """Driver errors become tickq errors here, and only here."""
    try:
        yield
    except TickqError:
        raise
    except psycopg.errors.InsufficientPrivilege as exc:
        raise TickqError(f"permission denied: {exc.diag.message_primary or exc}") from exc
    except psycopg.errors.UniqueViolation as exc:
        raise InvalidJob("idempotency_key", "is held by another live job") from exc
    except (psycopg.errors.CheckViolation, psycopg.DataError) as exc:
        raise InvalidJob("job", exc.diag.message_primary or str(exc)) from exc
    except UnicodeEncodeError:
        # A lone surrogate (invalid UTF-8 decoded with surrogateescape, e.g. from argv) in any
        # text parameter: the driver cannot encode it, so nothing reached the database.
        raise InvalidJob("text", "is not valid UTF-8 (lone surrogate characters)") from None
    except psycopg.errors.QueryCanceled as exc:
        raise DatabaseError(f"statement cancelled (statement_timeout?): {exc}") from exc
    except (psycopg.errors.TransactionRollback, psycopg.errors.SerializationFailure) as exc:
        raise DatabaseError(f"transaction rolled back, safe to retry: {exc}") from exc
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"database unavailable: {exc}") from exc
    except psycopg.Error as exc:
        if exc.sqlstate == QUEUE_FULL_SQLSTATE:  # raised by the jobs_app_admit trigger
            limit = int(exc.diag.message_hint or 0)
            raise QueueFull(exc.diag.message_detail or "", limit, limit) from exc
        raise DatabaseError(f"database error: {exc}") from exc


def named_rows(
    conn: psycopg.Connection[Any], name: str, params: dict[str, Any]
) -> list[dict[str, Any]]:
    """Run one named statement on `conn`; its rows by column name. For the standing
    policies' statements (schedules, limits, retention): few rows, off the hot path."""
    with translate_errors(), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(QUERIES[name], params)
        return cur.fetchall() if cur.description else []


def check_page_limit(limit: object) -> None:
    """A page of jobs holds 1 to MAX_PAGE of them."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidJob("limit", f"must be an integer between 1 and {MAX_PAGE}")


def encode_cursor(job: Job) -> str:
    raw = f"{job.created_at.isoformat()}|{job.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, UUID]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, id_ = base64.urlsafe_b64decode(padded.encode("ascii")).decode().split("|")
        when = datetime.fromisoformat(created)
        if when.tzinfo is None:
            raise ValueError("naive time")
        return when, UUID(id_)
    except (ValueError, UnicodeError, binascii.Error):
        raise InvalidJob("cursor", "is not a cursor this API returned") from None


def _column(params: dict[str, Any], column: str, values: list[Any]) -> None:
    """A column of jobs_enqueue: its scalar when every job has the same value, else the list."""
    if values.count(values[0]) == len(values):
        params[f"each_{column}"], params[f"all_{column}"] = None, values[0]
    else:
        params[f"each_{column}"], params[f"all_{column}"] = values, None


def _one_job_params(spec: JobSpec, now: datetime | None) -> dict[str, Any]:
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
        "backoff_base": spec.backoff.base,
        "backoff_factor": spec.backoff.factor,
        "backoff_max": spec.backoff.max,
        "backoff_jitter": spec.backoff.jitter,
        "group_key": spec.group_key,
    }


def _retry_params(**given: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"ids": None, "types": None, "queues": None, "limit": 1, "now": None}
    params.update(given)
    return params


def _statuses(statuses: Iterable[str] | None) -> list[str] | None:
    if statuses is None:
        return None
    values = list(statuses)
    for value in values:
        try:
            Status(value)
        except ValueError:
            allowed = ", ".join(s.value for s in Status)
            raise InvalidJob("status", f"{value!r} is not one of {allowed}") from None
    return values


def _uuid(value: UUID | str) -> UUID:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except ValueError:
        raise JobNotFound(value) from None


def _outcome_params(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The outcomes as jobs_finish_and_claim takes them: plain successes as two binary uuid
    arrays, the rest as JSON text."""
    ids: list[UUID] = []
    tokens: list[UUID] = []
    others: list[str] = []
    for o in outcomes:
        if o.is_plain_success:
            ids.append(o.job_id)
            tokens.append(o.lease_token)
        elif not o.suspended:  # a suspension was stored by its own statement
            others.append(_outcome_json(o))
    return {
        "outcomes": "[" + ",".join(others) + "]",
        "succeeded_ids": ids,
        "succeeded_tokens": tokens,
    }


def _outcome_json(o: Outcome) -> str:
    # Built as text: the result is already JSON, and re-parsing it per job costs more than
    # the statement that stores it.
    return (
        f'{{"id":"{o.job_id}","lease_token":"{o.lease_token}","status":"{o.status.value}",'
        f'"result":{o.result_json or "null"},"error":{json.dumps(o.error)},'
        f'"delay":{float(o.delay)!r},"extra_attempt":{"true" if o.extra_attempt else "false"}}}'
    )


class ClaimedRows:
    """A ClaimedBatch still on its cursor: the first row read, the rest parsed into Jobs
    (in claim order) on the first `jobs()` call."""

    def __init__(self, cursor: psycopg.Cursor[Any], first: Sequence[Any], at: int) -> None:
        self._jobs: list[Job] | None = None
        self._cursor: psycopg.Cursor[Any] | None = cursor
        self._first = first
        self._at = at  # where the job columns begin in each row
        result = cursor.pgresult
        self._count = result.ntuples if result is not None else 0

    def __len__(self) -> int:
        return self._count

    def jobs(self) -> list[Job]:
        if self._jobs is None:
            assert self._cursor is not None
            with translate_errors(), self._cursor as cur:
                rows = cur.fetchall()
            at = self._at
            jobs = [job_from_row(self._first[at:])]
            jobs += [job_from_row(row[at:]) for row in rows]
            jobs.sort(key=transitions.claim_order)
            self._jobs, self._cursor = jobs, None
        return self._jobs

    def discard(self) -> None:
        """Drop the unparsed rows (the jobs stay leased until their leases expire)."""
        if self._cursor is not None:
            self._cursor.close()
            self._cursor = None
        self._jobs = []


class _JsonbBinaryLoader(Loader):
    """jsonb as psycopg loads it, minus the generic loader's overhead: empty objects and
    arrays (most payloads and error histories) skip the parser, the rest parse from str."""

    format = pq.Format.BINARY

    def load(self, data: Buffer) -> Any:
        body = bytes(data[1:])  # after the jsonb format version byte
        if body == b"{}":
            return {}
        if body == b"[]":
            return []
        return json.loads(body.decode())


# Where the job columns begin in each statement's rows, found by name on its first run.
_JOB_AT: dict[str, int] = {}


def _job_columns_at(statement: str, cur: psycopg.Cursor[Any]) -> int:
    """The rows of `statement` carry the job columns from this index on, in JOB_COLUMNS
    order: checked by their names once per statement, then read by position (naming each
    field of each row would cost more than parsing it)."""
    at = _JOB_AT.get(statement)
    if at is None:
        result = cur.pgresult
        assert result is not None
        names = tuple((result.fname(i) or b"").decode() for i in range(result.nfields))
        width = len(JOB_COLUMNS)
        found = [i for i in range(len(names) - width + 1) if names[i : i + width] == JOB_COLUMNS]
        if not found:
            raise DatabaseError(f"{statement} does not return the job columns by name: {names}")
        at = _JOB_AT[statement] = found[0]
    return at


_Reading = Callable[[list[Any], int], list[Any]]


def _jobs(rows: list[Any], at: int) -> list[Job]:
    return [job_from_row(row[at:] if at else row) for row in rows]


def _jobs_and_flags(rows: list[Any], at: int) -> list[tuple[Job, bool]]:
    """jobs_enqueue_one: the job, then whether it is a duplicate."""
    width = len(JOB_COLUMNS)
    return [(job_from_row(row[at : at + width]), row[at + width]) for row in rows]


def _ids_and_jobs(rows: list[Any], at: int) -> list[tuple[Any, Job | None]]:
    """jobs_finish_and_claim: the held ids (first row only), then a job or all nulls."""
    return [(row[0], None if row[at] is None else job_from_row(row[at:])) for row in rows]


# mypy holds the adapter to the port it implements.
_ADAPTS: type[Store] = PostgresStore
