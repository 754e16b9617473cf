"""The task catalogue: each job type's settings, published by the workers' code to the
database, so a process that enqueues without the handler's module (a web process, the CLI,
SQL, another language) gets the task's own settings for what it leaves out.

Every worker and tick publishes its registry when it starts, and `tickq tasks sync --tasks
MODULES` does it from a deploy step (queue_core/postgres/catalog.py writes and reads the
table; this module is the pure part: what a task publishes, and the code version).
Enqueues read the catalogue: the Python ones through
`Registry.spec(..., catalog=...)` (the store's cached copy, `PostgresStore.task_catalog`),
the SQL ones in tickq.enqueue_job. Once the catalogue knows any type, a type it does not
know is refused, unless TICKQ_ACCEPT_UNKNOWN_TYPES (Python) or the setting
tickq.accept_unknown_types (SQL) is on.
"""

from __future__ import annotations

import hashlib
import inspect
import os
from collections.abc import Mapping
from typing import Any, Protocol

# Types a deployment may enqueue though no worker published them.
ACCEPT_UNKNOWN_ENV = "TICKQ_ACCEPT_UNKNOWN_TYPES"
# Workers that claim only jobs not yet run or last run under their own code version.
PIN_VERSION_ENV = "TICKQ_PIN_VERSION"


class Tasks(Protocol):
    """What publishing needs of a registry (queue_core.runner.registry.Registry): its tasks
    by name."""

    @property
    def tasks(self) -> Mapping[str, Any]: ...

    def names(self) -> list[str]: ...


def accepts_unknown_types(env: Mapping[str, str] | None = None) -> bool:
    value = (os.environ if env is None else env).get(ACCEPT_UNKNOWN_ENV, "")
    return value.strip().lower() in ("1", "on", "true", "yes")


def defaults_of(task: Any) -> dict[str, Any]:
    """A task's defaults in the shape of an enqueue request (what tickq.enqueue_job merges
    under a request): only those the task sets."""
    defaults: dict[str, Any] = {
        "queue": task.queue,
        "max_attempts": task.max_attempts,
        "lease_seconds": task.lease_seconds,
        "timeout": task.timeout,
        "priority": task.priority,
    }
    if task.backoff is not None:
        backoff = task.backoff
        defaults["backoff"] = {
            "base": backoff.base,
            "factor": backoff.factor,
            "max": backoff.max,
            "jitter": backoff.jitter,
        }
    templates = getattr(task, "flow_keys", ())
    if templates:
        # Not a request field (a request cannot give it): each enqueue path fills the
        # templates from the payload (tickq.enqueue_job, Registry.spec).
        defaults["flow_key_templates"] = list(templates)
    return {key: value for key, value in defaults.items() if value is not None}


def settings_of(task: Any) -> dict[str, Any]:
    """The rest of a task's settings, as `tickq tasks` shows them."""
    settings: dict[str, Any] = {
        "handler": f"{task.fn.__module__}.{getattr(task.fn, '__qualname__', task.fn)}",
        "async": task.is_async,
        "transactional": task.transactional,
        "batch_size": task.batch_size,
        "step_seconds": task.step_seconds,
        "events": sorted(status.value for status in task.events),
        "timeout": getattr(task, "timeout", None),
        "isolation": getattr(task, "isolation", "thread"),
    }
    return {
        key: value
        for key, value in settings.items()
        if value not in (None, False, []) and (key, value) != ("isolation", "thread")
    }


def code_version(registry: Any, env: Mapping[str, str] | None = None) -> str:
    """The version of the code that declared the tasks: TICKQ_CODE_VERSION, else the Lambda
    function's published version, else a hash of the task modules' source."""
    env = os.environ if env is None else env
    given = env.get("TICKQ_CODE_VERSION", "").strip()
    if given:
        return given[:200]
    lambda_version = env.get("AWS_LAMBDA_FUNCTION_VERSION", "").strip()
    if lambda_version and lambda_version != "$LATEST":
        return f"lambda:{lambda_version}"[:200]
    digest = hashlib.sha256()
    paths = {_source_file(task) for task in registry.tasks.values()}
    for path in sorted(p for p in paths if p is not None):
        try:
            with open(path, "rb") as source:
                digest.update(source.read())
        except OSError:
            digest.update(path.encode())
    return "source:" + digest.hexdigest()[:12]


def pinned_version(registry: Any, env: Mapping[str, str] | None = None) -> str | None:
    """The code version a worker pins its claims to when TICKQ_PIN_VERSION is on (its
    own, code_version), else None: it claims jobs of any version."""
    value = (os.environ if env is None else env).get(PIN_VERSION_ENV, "")
    if value.strip().lower() not in ("1", "on", "true", "yes"):
        return None
    return code_version(registry, env)


def _source_file(task: Any) -> str | None:
    try:
        return inspect.getsourcefile(task.fn)
    except TypeError:
        return None
