"""What every handler needs from queue_core: settings, the task registry and a store."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any
from uuid import UUID

from queue_core import PostgresStore, Registry, registry
from queue_core.config import Settings
from queue_core.postgres.probes import LIMITS_TTL_SECONDS
from queue_core.store.port import Store
from tickq.functions import app_role, db
from tickq.functions.aws import TimeLeft, invoke_async


def settings() -> Settings:
    return Settings.from_env()


def tasks() -> Registry:
    """The registry with TICKQ_TASK_MODULES imported (a no-op after the first call)."""
    registry.load_modules(settings().task_modules)
    return registry


def task_catalog(types: Iterable[Any]) -> dict[str, dict[str, Any]] | None:
    """The task catalogue, when a request names a type this deployment has no module of:
    one copy per process, re-read every few seconds (a store is made per request, and its
    own copy would cost each request a read)."""
    if not tasks().needs_catalog(types):
        return None
    checked = time.monotonic()
    if not _catalog or checked - _catalog[0] >= LIMITS_TTL_SECONDS:
        _catalog[:] = [checked, PostgresStore(db.connection()).task_catalog()]
    return _catalog[1]


# [read at, catalogue]: task_catalog's copy.
_catalog: list[Any] = []


def store(*, user_id: UUID | None = None, pin_version: str | None = None) -> Store:
    """A store on the environment's connection, scoped to `user_id` by row-level security
    (acting as tickq_app; a login that would bypass it is refused, see app_role), each
    statement of a user's transaction bounded by TICKQ_API_STATEMENT_TIMEOUT_MS.
    `pin_version`: a worker's, claiming only its code version's jobs (TICKQ_PIN_VERSION)."""
    conn = db.connection()
    if user_id is None:
        return PostgresStore(conn, pin_version=pin_version)
    app_role.ensure_scoped(conn)
    timeout = settings().api_statement_timeout_ms
    return PostgresStore(conn, user_id=user_id, statement_timeout_ms=timeout)


def kick_tick(time_left: TimeLeft) -> bool:
    """Start a tick now (TICKQ_KICK_FUNCTION) instead of waiting for the next schedule,
    within `time_left()` (the invocation's: a hung Lambda endpoint must not time it out)."""
    function = os.environ.get("TICKQ_KICK_FUNCTION")
    if not function:
        return False
    return invoke_async(function, {"source": "tickq.kick"}, time_left=time_left)
