"""Settings read from the environment, once, by the shells (CLI, Lambda handlers)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from queue_core.errors import ConfigurationError
from queue_core.model.jobs import DEFAULT_LEASE_SECONDS, DEFAULT_QUEUE
from queue_core.runner.timeouts import DEFAULT_MAX_ABANDONED


@dataclass(frozen=True, slots=True)
class Settings:
    database_url: str | None = None
    task_modules: tuple[str, ...] = ()
    queues: tuple[str, ...] = (DEFAULT_QUEUE,)
    batch_size: int = 10
    concurrency: int = 10
    lease_seconds: int = DEFAULT_LEASE_SECONDS
    # psycopg prepares a statement after it ran this many times; None (env "off") disables
    # server-side prepared statements, as transaction-pooling proxies require.
    prepare_threshold: int | None = 5
    # The API's user transactions (ApiFunction, `tickq serve`): each statement is cancelled
    # after this many milliseconds, so one caller's request cannot hold the database.
    api_statement_timeout_ms: int = 5000
    # How many abandoned handler threads (plain handlers past their timeout) a worker or a
    # tick lives with before it stops claiming (Runner's max_abandoned).
    max_abandoned_handlers: int = DEFAULT_MAX_ABANDONED

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        prepare = env.get("TICKQ_PREPARE_THRESHOLD", "5").strip().lower()
        return cls(
            database_url=env.get("TICKQ_DATABASE_URL") or None,
            task_modules=comma_list(env.get("TICKQ_TASK_MODULES", "")),
            queues=comma_list(env.get("TICKQ_QUEUES", "")) or (DEFAULT_QUEUE,),
            batch_size=env_int("TICKQ_BATCH_SIZE", 10, 1, 10_000, env),
            concurrency=env_int("TICKQ_CONCURRENCY", 10, 1, 1_000, env),
            lease_seconds=env_int("TICKQ_LEASE_SECONDS", DEFAULT_LEASE_SECONDS, 1, 43_200, env),
            prepare_threshold=None
            if prepare in ("off", "none", "")
            else _parse_int("TICKQ_PREPARE_THRESHOLD", prepare, 0, 1_000),
            api_statement_timeout_ms=env_int(
                "TICKQ_API_STATEMENT_TIMEOUT_MS", 5000, 1, 3_600_000, env
            ),
            max_abandoned_handlers=env_int(
                "TICKQ_MAX_ABANDONED_HANDLERS", DEFAULT_MAX_ABANDONED, 0, 10_000, env
            ),
        )


def comma_list(value: str | None) -> tuple[str, ...]:
    """The items of a comma-separated setting or parameter, trimmed, empty ones dropped."""
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


def env_int(
    name: str, default: int, low: int, high: int, env: Mapping[str, str] | None = None
) -> int:
    """An integer setting from the environment, checked against its range."""
    raw = (os.environ if env is None else env).get(name, "").strip()
    return default if not raw else _parse_int(name, raw, low, high)


def _parse_int(name: str, raw: str, low: int, high: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise ConfigurationError(f"{name} must be between {low} and {high}, got {value}")
    return value
