"""The Postgres store: each operation looks up one named statement, executes it, maps rows."""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
import psycopg.errors
from psycopg import pq
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.rows import RowMaker

from . import transitions, validation
from .errors import (
    DatabaseError,
    InvalidJob,
    InvalidTransition,
    JobNotFound,
    LeaseLost,
    QueueFull,
    TickqError,
)
from .ids import new_id
from .jobs import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_QUEUE,
    EnqueueResult,
    Job,
    JobSpec,
    Outcome,
    Status,
    job_from_row,
)
from .queries import QUERIES

MAX_PAGE = 500
# How long a store trusts its last look at the limit tables: a limit set or cleared takes
# effect on running workers within this time, and without limits no statement reads them.
LIMITS_TTL_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Page:
    jobs: list[Job]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class LimitsConfigured:
    types: bool
    queues: bool


@dataclass(frozen=True, slots=True)
class LeaseState:
    lease_until: datetime
    cancel_requested: bool


@dataclass(frozen=True, slots=True)
class StatsRow:
    queue: str
    type: str
    status: Status
    count: int
    oldest_runnable_seconds: float | None


class PostgresStore:
    """The queue on one psycopg connection.

    With an autocommit connection each operation is one statement, one round trip, its own
    transaction. With a connection inside the caller's transaction, operations join it.
    `user_id` scopes every operation to that user's rows through row-level security.
    """

    def __init__(self, conn: psycopg.Connection[Any], *, user_id: UUID | None = None) -> None:
        self.conn = conn
        self.user_id = user_id
        self._limits: tuple[float, LimitsConfigured] | None = None

    # Enqueue

    def enqueue(self, spec: JobSpec, *, now: datetime | None = None) -> EnqueueResult:
        return self.enqueue_many([spec], now=now, rows=True)[0]

    def enqueue_many(
        self, specs: Sequence[JobSpec], *, now: datetime | None = None, rows: bool = False
    ) -> list[EnqueueResult]:
        """Insert all specs in one statement; a spec whose key a live job holds gets that job.

        A target queue with a maximum depth is checked in the insert's transaction, under a
        lock on its limit row: QueueFull refuses the whole batch and nothing is written.
        """
        if specs and self.limits_configured().queues:
            with self.conn.transaction():
                self._admit(specs)
                return self._enqueue_many(specs, now=now, rows=rows)
        return self._enqueue_many(specs, now=now, rows=rows)

    def _admit(self, specs: Sequence[JobSpec]) -> None:
        incoming: dict[str, int] = {}
        for spec in specs:
            incoming[spec.queue] = incoming.get(spec.queue, 0) + 1
        params = {"queues": list(incoming), "counts": list(incoming.values())}
        for queue, depth, max_depth in self._rows("queue_limits_admit", params, None):
            raise QueueFull(queue, depth, max_depth)

    def _enqueue_many(
        self, specs: Sequence[JobSpec], *, now: datetime | None = None, rows: bool = False
    ) -> list[EnqueueResult]:
        """Insert all specs in one statement; a spec whose key a live job holds gets that job.

        Specs repeating a key within the batch resolve to the first one's job. With `rows`,
        each result carries the whole job row.
        """
        results: list[EnqueueResult | None] = [None] * len(specs)
        first_of_key: dict[tuple[str, UUID | None], int] = {}
        pending: list[int] = []
        for index, spec in enumerate(specs):
            if spec.idempotency_key is not None:
                key = (spec.idempotency_key, spec.user_id)
                if key in first_of_key:
                    continue
                first_of_key[key] = index
            pending.append(index)
        # A conflicting insert committed after our statement's snapshot is neither inserted
        # nor visible to it: such specs come back empty-handed and simply go again.
        for _ in range(10):
            if not pending:
                break
            pending = self._enqueue_round(specs, pending, results, now, rows)
        if pending:
            raise DatabaseError("enqueue did not settle after 10 rounds of key conflicts")
        for index, spec in enumerate(specs):
            if results[index] is None and spec.idempotency_key is not None:
                first = results[first_of_key[(spec.idempotency_key, spec.user_id)]]
                assert first is not None
                results[index] = replace(first, duplicate=True)
        return [r for r in results if r is not None]

    def _enqueue_round(
        self,
        specs: Sequence[JobSpec],
        pending: list[int],
        results: list[EnqueueResult | None],
        now: datetime | None,
        rows: bool,
    ) -> list[int]:
        batch = [specs[i] for i in pending]
        ids = [new_id() for _ in batch]
        params = {
            "now": now,
            "ids": ids,
            "queues": [s.queue for s in batch],
            "types": [s.type for s in batch],
            "user_ids": [s.user_id for s in batch],
            "payloads": [s.payload_json for s in batch],
            "keys": [s.idempotency_key for s in batch],
            "max_attempts": [s.max_attempts for s in batch],
            "priorities": [s.priority for s in batch],
            "run_afters": [s.run_after for s in batch],
            "delays": [s.delay for s in batch],
            "lease_seconds": [s.lease_seconds for s in batch],
            "backoff_bases": [s.backoff.base for s in batch],
            "backoff_factors": [s.backoff.factor for s in batch],
            "backoff_maxes": [s.backoff.max for s in batch],
            "backoff_jitters": [s.backoff.jitter for s in batch],
        }
        statement = "jobs_enqueue" if rows else "jobs_enqueue_slim"
        if rows and len(batch) == 1:
            keyed = batch[0].idempotency_key is not None
            statement = "jobs_enqueue_one" if keyed else "jobs_enqueue_one_unkeyed"
            params = _one_job_params(batch[0], ids[0], now)
        by_id: dict[UUID, EnqueueResult] = {}
        by_key: dict[tuple[str | None, UUID | None], EnqueueResult] = {}
        # A single enqueue reads its whole row back: binary skips parsing it as text.
        for values in self._rows(statement, params, None, binary=len(batch) == 1 and rows):
            duplicate = values[-1]
            if rows:
                job = job_from_row(values[:-1])
                found = EnqueueResult(job.id, job.status, duplicate, job)
                key = (job.idempotency_key, job.user_id)
            else:
                found = EnqueueResult(values[0], Status(values[1]), duplicate)
                key = (values[2], values[3])
            if duplicate:
                by_key[key] = found
            else:
                by_id[found.id] = found
        missing: list[int] = []
        for index, spec, id_ in zip(pending, batch, ids, strict=True):
            if id_ in by_id:
                results[index] = by_id[id_]
            elif (spec.idempotency_key, spec.user_id) in by_key:
                results[index] = by_key[(spec.idempotency_key, spec.user_id)]
            else:
                missing.append(index)
        return missing

    # Worker operations

    def claim(
        self,
        *,
        queues: Sequence[str] = (DEFAULT_QUEUE,),
        limit: int = 10,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        now: datetime | None = None,
    ) -> list[Job]:
        return self.finish_and_claim(
            (), queues=queues, limit=limit, lease_seconds=lease_seconds, now=now
        )[1]

    def finish(self, outcomes: Sequence[Outcome], *, now: datetime | None = None) -> set[UUID]:
        """Persist a batch of outcomes in one statement; returns the ids whose lease held."""
        if not outcomes:
            return set()
        return self.finish_and_claim(outcomes, limit=0, now=now)[0]

    def finish_and_claim(
        self,
        outcomes: Sequence[Outcome],
        *,
        queues: Sequence[str] = (DEFAULT_QUEUE,),
        limit: int = 10,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        now: datetime | None = None,
    ) -> tuple[set[UUID], list[Job]]:
        """Persist outcomes and lease up to `limit` more jobs, best first, in one statement.

        Returns the ids whose lease held (the others' outcomes were refused) and the jobs
        claimed. Under type limits the claim is a statement of its own (jobs_claim_limited).
        """
        held, claimed = self.finish_and_claim_unparsed(
            outcomes, queues=queues, limit=limit, lease_seconds=lease_seconds, now=now
        )
        return held, claimed.jobs()

    def finish_and_claim_unparsed(
        self,
        outcomes: Sequence[Outcome],
        *,
        queues: Sequence[str] = (DEFAULT_QUEUE,),
        limit: int = 10,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        now: datetime | None = None,
    ) -> tuple[set[UUID], Claimed]:
        """finish_and_claim, leaving the claimed rows unparsed until `Claimed.jobs()`, so a
        caller can parse them while the connection runs its next statement."""
        if limit and self.limits_configured().types:
            held = self.finish(outcomes, now=now)
            params = {
                "queues": list(queues),
                "limit": limit,
                "lease_seconds": lease_seconds,
                "now": now,
            }
            return held, Claimed(self._rows("jobs_claim_limited", params, _job, binary=True))
        ids: list[UUID] = []
        tokens: list[UUID] = []
        others: list[str] = []
        for o in outcomes:
            if o.is_plain_success:
                ids.append(o.job_id)
                tokens.append(o.lease_token)
            else:
                others.append(_outcome_json(o))
        params = {
            "outcomes": "[" + ",".join(others) + "]",
            "succeeded_ids": ids,
            "succeeded_tokens": tokens,
            "queue": queues[0] if len(queues) == 1 else None,
            "queues": list(queues),
            "limit": limit,
            "lease_seconds": lease_seconds,
            "now": now,
        }
        statement = "jobs_finish_and_claim" if len(queues) == 1 else "jobs_finish_and_claim_queues"
        if self.user_id is not None:  # its rows must be read inside the user's scope
            rows = self._rows(statement, params, None, binary=True)
            jobs = [job_from_row(row[1:]) for row in rows if row[1] is not None]
            return set(rows[0][0] or ()), Claimed(jobs)
        with translate_errors():
            # Binary rows: a claim returns whole jobs, and parsing them is its main client cost.
            cur = self.conn.cursor(binary=True)
            try:
                cur.adapters.register_loader("jsonb", _JsonbBinaryLoader)
                cur.execute(QUERIES[statement], params)
                first = cur.fetchone()  # the held ids, and the first job or all nulls
            except BaseException:
                cur.close()
                raise
        assert first is not None
        if first[1] is None:
            cur.close()
            return set(first[0] or ()), Claimed([])
        return set(first[0] or ()), Claimed(cur, first)

    def complete(self, job: Job, result: Any = None, *, now: datetime | None = None) -> None:
        self._finish_one(transitions.succeeded(job, result), now)

    def fail(
        self, job: Job, error: str, *, permanent: bool = False, now: datetime | None = None
    ) -> None:
        self._finish_one(transitions.failed(job, error, permanent=permanent), now)

    def _finish_one(self, outcome: Outcome, now: datetime | None) -> None:
        if outcome.job_id not in self.finish([outcome], now=now):
            raise LeaseLost(outcome.job_id)

    def reclaim(self, *, limit: int = 1000, now: datetime | None = None) -> list[Job]:
        """Expired leases back to retrying or dead; returns the jobs as they now stand."""
        return self._rows("jobs_reclaim", {"limit": limit, "now": now}, _job)

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
        """Subscribe to enqueue notifications; False (nothing done) inside a transaction,
        where LISTEN would wait for the caller's commit."""
        if not self.conn.autocommit:
            return False
        self._rows("jobs_listen", {}, None)
        return True

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

    # Reading and operating

    def get(self, job_id: UUID | str) -> Job:
        rows = self._rows("jobs_get", {"id": _uuid(job_id)}, _job)
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
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
            raise InvalidJob("limit", f"must be an integer between 1 and {MAX_PAGE}")
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
        jobs = self._rows("jobs_list", params, _job)
        next_cursor = encode_cursor(jobs[limit - 1]) if len(jobs) > limit else None
        return Page(jobs[:limit], next_cursor)

    def cancel(self, job_id: UUID | str, *, now: datetime | None = None) -> Job:
        rows = self._rows("jobs_cancel", {"ids": [_uuid(job_id)], "now": now}, _job)
        if rows:
            return rows[0]
        job = self.get(job_id)
        raise InvalidTransition(job.id, job.status, "cancel")

    def retry(self, job_id: UUID | str, *, now: datetime | None = None) -> Job:
        params = _retry_params(ids=[_uuid(job_id)], statuses=["dead", "cancelled"], now=now)
        rows = self._rows("jobs_retry", params, _job)
        if rows:
            return rows[0]
        job = self.get(job_id)
        if job.status in (Status.DEAD, Status.CANCELLED):
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
        return self._rows("jobs_retry", params, _job)

    def stats(self, *, now: datetime | None = None) -> list[StatsRow]:
        rows = self._rows("jobs_stats", {"now": now}, None)
        return [
            StatsRow(q, t, Status(s), c, None if age is None else float(age))
            for q, t, s, c, age in rows
        ]

    def stats_all_users(self, *, now: datetime | None = None) -> list[StatsRow]:
        """`stats` over every user's jobs, as tickq_worker for one transaction.

        For operator views on an application login: it must be allowed to SET ROLE
        tickq_worker without inheriting it, so its other queries stay under row-level security.
        """
        with translate_errors(), self.conn.transaction():
            self.conn.execute(QUERIES["role_worker"])
            return self.stats(now=now)

    def limits_configured(self) -> LimitsConfigured:
        """Whether any type or queue limit exists, re-read every LIMITS_TTL_SECONDS."""
        checked = time.monotonic()
        if self._limits is None or checked - self._limits[0] >= LIMITS_TTL_SECONDS:
            types, queues = self._rows("limits_configured", {}, None)[0]
            self._limits = (checked, LimitsConfigured(bool(types), bool(queues)))
        return self._limits[1]

    def now(self) -> datetime:
        row = self._rows("clock_now", {}, None)[0]
        value: datetime = row[0]
        return value

    # Plumbing

    def _rows(
        self, name: str, params: dict[str, Any], row_maker: Any, *, binary: bool = False
    ) -> list[Any]:
        """Run one named statement; `binary` results skip text parsing of uuids and times."""
        query = QUERIES[name]
        with translate_errors(), self._scope():
            cur = (
                self.conn.cursor(row_factory=row_maker, binary=binary)
                if row_maker
                else self.conn.cursor(binary=binary)
            )
            with cur:
                if binary:
                    cur.adapters.register_loader("jsonb", _JsonbBinaryLoader)
                cur.execute(query, params)
                # The result status, not cur.description: describing a whole job row builds
                # a Column per field, which costs more than a one-row statement's parsing.
                result = cur.pgresult
                has_rows = result is not None and result.status == pq.ExecStatus.TUPLES_OK
                return cur.fetchall() if has_rows else []

    @contextmanager
    def _scope(self) -> Iterator[None]:
        if self.user_id is None:
            yield
            return
        with self.conn.transaction():
            self.conn.execute(QUERIES["user_scope"], {"user_id": str(self.user_id)})
            yield


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
    except psycopg.errors.TransactionRollback as exc:
        raise DatabaseError(f"transaction rolled back, safe to retry: {exc}") from exc
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"database unavailable: {exc}") from exc
    except psycopg.Error as exc:
        raise DatabaseError(f"database error: {exc}") from exc


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


def _one_job_params(spec: JobSpec, id_: UUID, now: datetime | None) -> dict[str, Any]:
    return {
        "now": now,
        "id": id_,
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


def _outcome_json(o: Outcome) -> str:
    # Built as text: the result is already JSON, and re-parsing it per job costs more than
    # the statement that stores it.
    return (
        f'{{"id":"{o.job_id}","lease_token":"{o.lease_token}","status":"{o.status.value}",'
        f'"result":{o.result_json or "null"},"error":{json.dumps(o.error)},'
        f'"delay":{float(o.delay)!r},"extra_attempt":{"true" if o.extra_attempt else "false"}}}'
    )


class Claimed:
    """The jobs one statement leased, parsed into Jobs on the first `jobs()` call."""

    def __init__(
        self, source: list[Job] | psycopg.Cursor[Any], first: Sequence[Any] | None = None
    ) -> None:
        self._jobs: list[Job] | None = None
        self._cursor: psycopg.Cursor[Any] | None = None
        if isinstance(source, list):
            self._jobs = source
            self._jobs.sort(key=transitions.claim_order)
            self._count = len(source)
        else:
            self._cursor, self._first = source, first
            result = source.pgresult
            self._count = result.ntuples if result is not None else 0

    def __len__(self) -> int:
        return self._count

    def jobs(self) -> list[Job]:
        if self._jobs is None:
            assert self._cursor is not None and self._first is not None
            with translate_errors(), self._cursor as cur:
                rows = cur.fetchall()
            jobs = [job_from_row(self._first[1:])]
            jobs += [job_from_row(row[1:]) for row in rows]
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


def _job(cursor: psycopg.Cursor[Any]) -> RowMaker[Job]:
    def make(values: Sequence[Any]) -> Job:
        return job_from_row(values)

    return make
