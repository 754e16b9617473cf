"""The worker cycle's operations that every store builds the same way from its one
statement, finish_and_claim_unparsed: claim, finish, finish_and_claim, complete and fail.

Both adapters inherit them, so they cannot drift apart. The direction is one way: these
call the adapter's finish_and_claim_unparsed, and no adapter calls back into them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from queue_core.errors import LeaseLost
from queue_core.model import transitions
from queue_core.model.jobs import DEFAULT_LEASE_SECONDS, DEFAULT_QUEUE, Job, Outcome
from queue_core.store.port import ClaimedBatch


class _FinishesAndClaims(Protocol):
    def finish_and_claim_unparsed(
        self,
        outcomes: Sequence[Outcome],
        *,
        queues: Sequence[str] = ...,
        limit: int = ...,
        lease_seconds: int = ...,
        now: datetime | None = None,
        seed: bytes | None = None,
    ) -> tuple[set[UUID], ClaimedBatch]: ...


class DerivedOperations:
    """The port's claim, finish, finish_and_claim, complete and fail, each one call of the
    store's finish_and_claim_unparsed."""

    def claim(
        self: _FinishesAndClaims,
        *,
        queues: Sequence[str] = (DEFAULT_QUEUE,),
        limit: int = 10,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        now: datetime | None = None,
        seed: bytes | None = None,
    ) -> list[Job]:
        claimed = self.finish_and_claim_unparsed(
            (), queues=queues, limit=limit, lease_seconds=lease_seconds, now=now, seed=seed
        )[1]
        return claimed.jobs()

    def finish(
        self: _FinishesAndClaims, outcomes: Sequence[Outcome], *, now: datetime | None = None
    ) -> set[UUID]:
        """Persist a batch of outcomes in one statement; returns the ids whose lease held."""
        if not outcomes:
            return set()
        return self.finish_and_claim_unparsed(outcomes, limit=0, now=now)[0]

    def finish_and_claim(
        self: _FinishesAndClaims,
        outcomes: Sequence[Outcome],
        *,
        queues: Sequence[str] = (DEFAULT_QUEUE,),
        limit: int = 10,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        now: datetime | None = None,
    ) -> tuple[set[UUID], list[Job]]:
        """Persist outcomes and lease up to `limit` more jobs, best first, in one statement.

        Returns the ids whose lease held (the others' outcomes were refused) and the jobs
        claimed."""
        held, claimed = self.finish_and_claim_unparsed(
            outcomes, queues=queues, limit=limit, lease_seconds=lease_seconds, now=now
        )
        return held, claimed.jobs()

    def complete(
        self: _FinishesAndClaims, job: Job, result: Any = None, *, now: datetime | None = None
    ) -> None:
        _finish_one(self, transitions.succeeded(job, result), now)

    def fail(
        self: _FinishesAndClaims,
        job: Job,
        error: str,
        *,
        permanent: bool = False,
        now: datetime | None = None,
    ) -> None:
        _finish_one(self, transitions.failed(job, error, permanent=permanent), now)


def _finish_one(store: _FinishesAndClaims, outcome: Outcome, now: datetime | None) -> None:
    if outcome.job_id not in store.finish_and_claim_unparsed([outcome], limit=0, now=now)[0]:
        raise LeaseLost(outcome.job_id)
