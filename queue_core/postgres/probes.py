"""The store's cached look at the limit tables, so that without limits no claim or enqueue
reads them."""

from __future__ import annotations

import time
from typing import Any

from queue_core.postgres.executor import Executor
from queue_core.store.port import LimitsConfigured

# How long a store trusts its last look at the limit tables: a limit set or cleared takes
# effect on running workers within this time, and without limits no statement reads them.
LIMITS_TTL_SECONDS = 5.0


class LimitsProbe:
    """Whether any type or queue limit or cap per group exists, re-read every
    LIMITS_TTL_SECONDS."""

    def __init__(self, db: Executor) -> None:
        self._db = db
        self._seen: tuple[float, LimitsConfigured] | None = None

    def current(self) -> LimitsConfigured:
        checked = time.monotonic()
        if self._seen is None or checked - self._seen[0] >= LIMITS_TTL_SECONDS:
            row = self._db.rows("limits_configured", {})[0]
            types, queues, per_group, may_write, flow = row
            self._db.note_may_write(may_write)
            configured = LimitsConfigured(bool(types), bool(queues), bool(per_group), bool(flow))
            self._seen = (checked, configured)
        return self._seen[1]

    def forget(self) -> None:
        """Look again at the next claim (this store just set a limit or a hold)."""
        self._seen = None


class CatalogProbe:
    """The task catalogue's defaults by type (queue_core.model.catalog), re-read every
    LIMITS_TTL_SECONDS: a deploy's publication reaches running enqueuers within that time,
    and an enqueue pays no read for it in between."""

    def __init__(self, db: Executor) -> None:
        self._db = db
        self._seen: tuple[float, dict[str, dict[str, Any]]] | None = None

    def current(self) -> dict[str, dict[str, Any]]:
        checked = time.monotonic()
        if self._seen is None or checked - self._seen[0] >= LIMITS_TTL_SECONDS:
            rows = self._db.rows("task_catalog_defaults", {})
            self._seen = (checked, {type_: dict(defaults) for type_, defaults in rows})
        return self._seen[1]
