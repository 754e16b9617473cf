"""PostgresStore: the store port's adapter for PostgreSQL, composed of one part per concern.

Each part is a class of its own module, and every part runs its statements through the
store's one executor (`_db`): enqueue (enqueue.py), the claim and its outcomes (claim.py),
leases (leases.py), reads and single-job actions (reads.py); durable steps (steps.py) are a
view of the store. What the parts share is created here: the executor, the cached look at
the limit tables, the fair claim's sweep positions and the paused-queue probe.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any
from uuid import UUID

import psycopg

from queue_core.model.fairness import GROUPS_TTL_SECONDS, FairState
from queue_core.model.paused_queues import PausedQueues
from queue_core.postgres.claim import Claims
from queue_core.postgres.enqueue import Enqueues
from queue_core.postgres.executor import Executor
from queue_core.postgres.leases import Leases
from queue_core.postgres.probes import CatalogProbe, LimitsProbe
from queue_core.postgres.reads import Reads
from queue_core.postgres.steps import StepStore
from queue_core.postgres.transactional import Handling
from queue_core.store.derived import DerivedOperations
from queue_core.store.port import LimitsConfigured, Store


class PostgresStore(Enqueues, Claims, Leases, Reads, Handling, DerivedOperations):
    """The queue on one psycopg connection: the store port's adapter for PostgreSQL.

    With an autocommit connection each operation is one statement, one round trip, its own
    transaction. With a connection inside the caller's transaction, operations join it.
    `user_id` scopes every operation to that user's rows through row-level security.
    `groups_ttl_seconds` and `rand` tune the fair claim (see queue_core.model.fairness).
    """

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        *,
        user_id: UUID | None = None,
        groups_ttl_seconds: float = GROUPS_TTL_SECONDS,
        rand: Callable[[], float] = random.random,
        statement_timeout_ms: int | None = None,
        pin_version: str | None = None,
    ) -> None:
        """`statement_timeout_ms` bounds each statement of the user's transactions (an
        outside caller's request must not hold the database for long); None: the session's.
        `pin_version`: claim only jobs not yet run or last run under this code version."""
        self._db = Executor(conn, user_id=user_id, statement_timeout_ms=statement_timeout_ms)
        self.pin_version = pin_version
        self._limits = LimitsProbe(self._db)
        self._catalog = CatalogProbe(self._db)
        self._fair = FairState(groups_ttl_seconds, rand)
        self.paused = PausedQueues()

    @property
    def conn(self) -> psycopg.Connection[Any]:
        return self._db.conn

    @property
    def user_id(self) -> UUID | None:
        return self._db.user_id

    @property
    def autocommit(self) -> bool:
        return self._db.conn.autocommit

    def close(self) -> None:
        self._db.conn.close()

    @property
    def steps(self) -> StepStore:
        """This store's durable-step operations (a view of the store, made on each use)."""
        return StepStore(self)

    def task_catalog(self) -> dict[str, dict[str, Any]]:
        """The task catalogue's defaults by type (queue_core.model.catalog), cached a few seconds:
        what `Registry.spec(..., catalog=...)` fills a request from when this process does
        not have the handler's module."""
        return self._catalog.current()

    def limits_configured(self) -> LimitsConfigured:
        """Whether any type or queue limit or cap per group exists, re-read every
        LIMITS_TTL_SECONDS."""
        return self._limits.current()


# mypy holds the adapter to the port it implements.
_ADAPTS: type[Store] = PostgresStore
