"""The store port on PostgreSQL: the executor every PostgreSQL module runs its statements
through, and PostgresStore composed of its parts (enqueue, claim, leases, reads, steps).

Only this package and the modules that keep their own tables (schedules, limits,
retention, partitions, pauses, the console and its history) know SQL; the runner, the
handler context and the steps know the port (queue_core.store.port) alone.
"""

from __future__ import annotations

from queue_core.postgres.executor import Executor, translate_errors
from queue_core.postgres.steps import StepStore
from queue_core.postgres.store import PostgresStore

__all__ = ["Executor", "PostgresStore", "StepStore", "translate_errors"]
