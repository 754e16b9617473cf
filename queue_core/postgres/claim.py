"""The claim on PostgreSQL: which statement leases the next jobs, and the outcomes it
persists on the way.

Plain claims persist a batch's outcomes and lease the next jobs in one statement
(jobs_finish_and_claim, or _queues for several queues). Taking turns across groups, or
under caps per group, the claim is jobs_finish_and_claim_fair; under type limits alone, a
statement of its own (jobs_claim_limited); under flow limits or holds alone,
jobs_finish_and_claim_flow (the fair and limited claims honour flow keys themselves).
Paused queues are left out of every claim. The plain statements claim nothing while any
type limit, cap per group, flow limit or live hold exists, and say so: the store then looks
at the limit tables again and claims with the statement that honours them, so a limit set by
another process holds from the next claim on, though the store's probe caches its look.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from queue_core.errors import ConfigurationError
from queue_core.model import transitions
from queue_core.model.fairness import FairState
from queue_core.model.jobs import DEFAULT_LEASE_SECONDS, DEFAULT_QUEUE, Job, Outcome, job_from_row
from queue_core.model.paused_queues import PausedQueues, claimable
from queue_core.postgres.executor import (
    Executor,
    ids_and_jobs,
    job_columns_at,
    jobs,
    rerun,
    translate_errors,
)
from queue_core.postgres.probes import LimitsProbe
from queue_core.postgres.statements import QUERIES
from queue_core.store.port import NO_JOBS, ClaimedBatch, JobList

# The seed of a statement that leases nothing (its value is never used).
NO_SEED = bytes(16)


class Claims:
    """The store's claim, and waking idle workers when jobs arrive."""

    _db: Executor
    _limits: LimitsProbe
    _fair: FairState
    paused: PausedQueues
    # The code version a pinned worker claims jobs of (TICKQ_PIN_VERSION); None: any.
    pin_version: str | None

    def finish_and_claim_unparsed(
        self,
        outcomes: Sequence[Outcome],
        *,
        queues: Sequence[str] = (DEFAULT_QUEUE,),
        limit: int = 10,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        now: datetime | None = None,
        seed: bytes | None = None,
    ) -> tuple[set[UUID], ClaimedBatch]:
        """Persist outcomes and lease up to `limit` more jobs, best first, leaving the
        claimed rows unparsed until `jobs()`, so a caller can parse them while the
        connection runs its next statement. Every lease of the call derives its token from
        `seed` (tickq.jobs_lease; none: the database draws one)."""
        if limit:  # paused queues are left out of the claim (queue_core/policies/pauses.py)
            queues, limit = claimable(queues, limit, self.paused.current(self._paused_queues))
        if limit and self.pin_version is not None:
            return self._finish_and_claim_pinned(
                outcomes, queues, limit, lease_seconds, now, seed, self.pin_version
            )
        if limit and self._claims_fairly(queues):
            return self._finish_and_claim_fair(outcomes, queues, limit, lease_seconds, now, seed)
        if limit and self._limits.current().types:
            # tickq.claim_limited honours flow keys itself while any limit or hold exists.
            held = self._finish(outcomes, now)
            params = {
                "queues": list(queues),
                "limit": limit,
                "lease_seconds": lease_seconds,
                "now": now,
                "seed": seed,
            }
            claimed = self._db.rows("jobs_claim_limited", params, jobs, binary=True)
            return held, JobList(sorted(claimed, key=transitions.claim_order))
        if limit and self._limits.current().flow:
            return self._finish_and_claim_flow(outcomes, queues, limit, lease_seconds, now, seed)
        # The plain claim, inline: it runs once per batch of every worker.
        held, batch, limited = self._finish_and_claim_plain(
            outcomes, queues, limit, lease_seconds, now, seed
        )
        if limited and limit and not len(batch):
            # A limit or hold appeared since the probe last looked (another process set it):
            # the plain pick claimed nothing. Look again, and claim under it now.
            self._limits.forget()
            if self._limits.current().any_claim_limit:
                again = self.finish_and_claim_unparsed(
                    (), queues=queues, limit=limit, lease_seconds=lease_seconds, now=now, seed=seed
                )
                return held | again[0], again[1]
        return held, batch

    def _finish_and_claim_plain(
        self,
        outcomes: Sequence[Outcome],
        queues: Sequence[str],
        limit: int,
        lease_seconds: int,
        now: datetime | None,
        seed: bytes | None,
    ) -> tuple[set[UUID], ClaimedBatch, bool]:
        """The plain claim: the held ids, the jobs, and whether it claimed nothing because a
        limit or hold exists (the guard of jobs_finish_and_claim) that this store's probe
        had not seen."""
        params = {
            **outcome_params(outcomes),
            "queue": queues[0] if len(queues) == 1 else None,
            "queues": list(queues),
            "limit": limit,
            "lease_seconds": lease_seconds,
            "now": now,
            # Always a uuid, so a statement that claims nothing shares its parameter types
            # (and so its prepared statement) with one that claims.
            "seed": seed or (os.urandom(16) if limit else NO_SEED),
        }
        statement = "jobs_finish_and_claim" if len(queues) == 1 else "jobs_finish_and_claim_queues"
        if self._db.user_id is not None:  # its rows must be read inside the user's scope
            rows = self._db.rows(statement, params, _guarded_ids_and_jobs, binary=True)
            claimed = [job for _, _, job in rows if job is not None]
            batch = JobList(sorted(claimed, key=transitions.claim_order))
            return set(rows[0][0] or ()), batch, bool(rows[0][1])
        with translate_errors():
            # Binary rows: a claim returns whole jobs, and parsing them is its main client cost.
            cur = self._db.cursor(binary=True)
            try:
                rerun(self._db.conn, lambda: cur.execute(QUERIES[statement], params))
                first = cur.fetchone()  # the held ids, and the first job or all nulls
            except BaseException:
                cur.close()
                raise
        assert first is not None
        at = job_columns_at(statement, cur)
        if first[at] is None:
            cur.close()
            return set(first[0] or ()), NO_JOBS, bool(first[1])
        return set(first[0] or ()), ClaimedRows(cur, first, at), False

    def _finish_and_claim_pinned(
        self,
        outcomes: Sequence[Outcome],
        queues: Sequence[str],
        limit: int,
        lease_seconds: int,
        now: datetime | None,
        seed: bytes | None,
        version: str,
    ) -> tuple[set[UUID], ClaimedBatch]:
        """The claim of a pinned worker (jobs_finish_and_claim_pinned). Taking turns across
        groups, type limits and flow limits are claims of their own that know nothing of
        versions: a pinned worker refuses them rather than lease a job of another version."""
        if self._claims_fairly(queues) or self._limits.current().types:
            raise ConfigurationError(
                "TICKQ_PIN_VERSION: a pinned worker claims in plain priority order; its "
                f"queues {list(queues)} take turns across groups or have type limits"
            )
        if self._limits.current().flow:
            raise ConfigurationError(
                "TICKQ_PIN_VERSION: a pinned worker claims in plain priority order, and flow"
                " limits or holds exist; clear them (tickq flow clear) or unpin the worker"
            )
        params = {"seed": seed or os.urandom(16), "code_version": version}
        return self._finish_and_claim_in(
            "jobs_finish_and_claim_pinned", outcomes, queues, limit, lease_seconds, now, params
        )

    def _finish_and_claim_flow(
        self,
        outcomes: Sequence[Outcome],
        queues: Sequence[str],
        limit: int,
        lease_seconds: int,
        now: datetime | None,
        seed: bytes | None,
    ) -> tuple[set[UUID], ClaimedBatch]:
        """The plain claim while flow limits or holds exist (jobs_finish_and_claim_flow):
        the same finish and order, each key kept within its limits."""
        return self._finish_and_claim_in(
            "jobs_finish_and_claim_flow",
            outcomes,
            queues,
            limit,
            lease_seconds,
            now,
            {"seed": seed},
        )

    def _finish_and_claim_in(
        self,
        statement: str,
        outcomes: Sequence[Outcome],
        queues: Sequence[str],
        limit: int,
        lease_seconds: int,
        now: datetime | None,
        params: dict[str, Any],
    ) -> tuple[set[UUID], ClaimedBatch]:
        """A finish-and-claim statement of several queues (the pinned one, the flow one)
        run with its own `params` besides the common ones: the held ids and the jobs, in
        claim order."""
        common = {"queues": list(queues), "limit": limit, "lease_seconds": lease_seconds}
        everything = {**outcome_params(outcomes), **common, "now": now, **params}
        rows = self._db.rows(statement, everything, ids_and_jobs, binary=True)
        claimed = [job for _, job in rows if job is not None]
        return set(rows[0][0] or ()), JobList(sorted(claimed, key=transitions.claim_order))

    def _finish(self, outcomes: Sequence[Outcome], now: datetime | None) -> set[UUID]:
        """Persist outcomes alone (the plain statement, claiming no job); the ids whose
        lease held."""
        if not outcomes:
            return set()
        return self.finish_and_claim_unparsed(outcomes, limit=0, now=now)[0]

    def recover_claimed(
        self,
        seeds: Sequence[bytes],
        *,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        now: datetime | None = None,
    ) -> ClaimedBatch:
        """The jobs that claims drawn from `seeds` leased and that still run under those
        leases (jobs_claim_recover), as claimed."""
        if not seeds:
            return NO_JOBS
        params = {"seeds": list(seeds), "lease_seconds": lease_seconds, "now": now}
        found = self._db.rows("jobs_claim_recover", params, jobs, binary=True)
        return JobList(sorted(found, key=transitions.claim_order))

    def _claims_fairly(self, queues: Sequence[str]) -> bool:
        """Whether the claim must take turns across tenants and groups: a cap per group is
        set, or a queue's waiting jobs span more than one group (re-read every
        GROUPS_TTL_SECONDS).
        Otherwise the plain statements run, unchanged."""
        if self._limits.current().per_group:
            return True
        for queue in queues:
            mixed = self._fair.mixed_known(queue)
            if mixed is None:
                first, last = self._db.rows("jobs_groups_span", {"queue": queue})[0]
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
        seed: bytes | None,
    ) -> tuple[set[UUID], ClaimedBatch]:
        """Persist the outcomes and lease up to `limit` jobs taking turns across groups, in
        one statement for the first queue (jobs_finish_and_claim_fair), then queue by queue
        in the order given; each queue's sweep resumes where this store's last one ended."""
        params = {
            **outcome_params(outcomes),
            **self._fair_params(queues[0], limit, lease_seconds, now, seed),
        }
        rows = self._db.rows("jobs_finish_and_claim_fair", params, ids_and_jobs, binary=True)
        held = set(rows[0][0] or ())
        claimed = [job for _, job in rows if job is not None]
        self._fair.advance(queues[0], claimed)
        for queue in queues[1:]:
            if len(claimed) >= limit:
                break
            params = self._fair_params(queue, limit - len(claimed), lease_seconds, now, seed)
            taken = self._db.rows("jobs_claim_fair", params, jobs, binary=True)
            self._fair.advance(queue, taken)
            claimed += taken
        return held, JobList(sorted(claimed, key=transitions.claim_order))

    def _fair_params(
        self, queue: str, limit: int, lease_seconds: int, now: datetime | None, seed: bytes | None
    ) -> dict[str, Any]:
        return {
            "queue": queue,
            "limit": limit,
            "lease_seconds": lease_seconds,
            "now": now,
            "seed": seed,
            "after": self._fair.after.get(queue),
            "positions": self._fair.positions_of(queue),
        }

    def _paused_queues(self) -> list[str]:
        return list(self._db.rows("queue_pauses_probe", {})[0][0])

    # Waking idle workers (long-running workers only; never in a Lambda tick)

    def listen_for_jobs(self) -> bool:
        """Subscribe to enqueue notifications; False (nothing kept) inside a transaction,
        where LISTEN would wait for the caller's commit, or where the subscription does
        not stay with this session."""
        if not self._db.conn.autocommit:
            return False
        self._db.rows("jobs_listen", {})
        # Behind a transaction-mode pooler the next statement may run in another server
        # session, one that never listened: then LISTEN cannot wake us.
        if self._db.rows("jobs_listening", {}) == [(True,)]:
            return True
        self._db.rows("jobs_unlisten", {})
        return False

    def unlisten_jobs(self) -> None:
        self._db.rows("jobs_unlisten", {})

    def wait_for_jobs(self, timeout: float) -> bool:
        """Block up to `timeout` seconds for an enqueue notification; True if one came.

        Notifications that arrived while other statements ran are returned at once (and all
        consumed), so a job enqueued just after the last claim is never slept through.
        """
        woken = False
        with translate_errors():
            for _ in self._db.conn.notifies(timeout=max(timeout, 0.0), stop_after=1):
                woken = True
        return woken


def _guarded_ids_and_jobs(rows: list[Any], at: int) -> list[tuple[Any, Any, Job | None]]:
    """A reading for the plain finish-and-claim statements: the held ids and the guard's
    flag (first row only), then a job or all nulls."""
    return [(row[0], row[1], None if row[at] is None else job_from_row(row[at:])) for row in rows]


def outcome_params(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The outcomes as jobs_finish_and_claim takes them: plain successes as two binary uuid
    arrays, the rest as JSON text."""
    ids: list[UUID] = []
    tokens: list[UUID] = []
    others: list[str] = []
    for o in outcomes:
        if o.is_plain_success:
            ids.append(o.job_id)
            tokens.append(o.lease_token)
        elif not o.stored:  # a suspension or a handler's commit stored it already
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
        f'"delay":{float(o.delay)!r},"extra_attempt":{"true" if o.extra_attempt else "false"},'
        f'"event":{o.event_json or "null"}'
        + ("}" if o.batch_id is None else f',"batch_id":"{o.batch_id}"}}')
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
            parsed = [job_from_row(self._first[at:])]
            parsed += [job_from_row(row[at:]) for row in rows]
            parsed.sort(key=transitions.claim_order)
            self._jobs, self._cursor = parsed, None
        return self._jobs

    def discard(self) -> None:
        """Drop the unparsed rows (the jobs stay leased until their leases expire)."""
        if self._cursor is not None:
            self._cursor.close()
            self._cursor = None
        self._jobs = []
