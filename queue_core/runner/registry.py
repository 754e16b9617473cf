"""Handlers by job type: the @task decorator and the registry workers look types up in."""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from queue_core.errors import ConfigurationError
from queue_core.model import flow, payloads, validation
from queue_core.model.backoff import Backoff
from queue_core.model.catalog import accepts_unknown_types
from queue_core.model.events import event_statuses
from queue_core.model.job_batch import JobBatch
from queue_core.model.jobs import JobSpec, Status

Handler = Callable[..., Any]
# The request fields Registry.batch checks on its fast path; any other takes spec's path.
_PLAIN_REQUEST = frozenset({"type", "payload", "idempotency_key"})


@dataclass(frozen=True, slots=True)
class Task:
    """A handler and the defaults its jobs are enqueued with."""

    name: str
    fn: Handler
    is_async: bool
    queue: str | None = None
    max_attempts: int | None = None
    lease_seconds: int | None = None
    priority: int | None = None
    backoff: Backoff | None = None
    # Durable steps: the longest a step takes; a step that would not fit in the time left
    # suspends the job first (docs/steps.md). None: steps never suspend on their own.
    step_seconds: float | None = None
    # Called as fn(job, conn): the handler's writes and the job's success commit together
    # (queue_core/postgres/transactional.py).
    transactional: bool = False
    # Called as fn(batch) with up to this many claimed jobs of the type at once
    # (queue_core/runner/batch_handler.py). None: one call per job.
    batch_size: int | None = None
    # The lifecycle events its jobs write into the outbox besides `Job Dead`, by the status
    # of the outcome (queue_core/policies/outbox.py). Empty: none, and the finish pays nothing.
    events: frozenset[Status] = frozenset()
    # Seconds a call may run before the runner stops it (queue_core/runner/timeouts.py); a job's
    # own timeout, given at enqueue, overrides it. None: no limit.
    timeout: int | None = None
    # "process": each call runs in a child process, killed at the timeout; "thread" (the
    # default): in the runner's thread, which a timeout fails and abandons.
    isolation: str = "thread"
    # Flow key templates filled from each job's payload (`shop:{shop}`, queue_core/model/flow.py).
    flow_keys: tuple[str, ...] = ()


ISOLATIONS = ("thread", "process")

# The most jobs one batch handler call may hold: as many as one claim may lease.
MAX_HANDLER_BATCH = 10_000


class Registry:
    def __init__(self) -> None:
        self.tasks: dict[str, Task] = {}

    @property
    def batched(self) -> bool:
        """Whether some task consumes batches: only then does the runner group a claim's
        jobs by type, so a registry of plain handlers pays one look per claim for it."""
        return any(task.batch_size is not None for task in self.tasks.values())

    def task(
        self,
        name: str,
        *,
        queue: str | None = None,
        max_attempts: int | None = None,
        lease_seconds: int | None = None,
        priority: int | None = None,
        backoff: Backoff | Mapping[str, float] | None = None,
        step_seconds: float | None = None,
        transactional: bool = False,
        batch_size: int | None = None,
        events: Iterable[str] = (),
        timeout: int | None = None,
        isolation: str = "thread",
        flow_keys: Sequence[str] = (),
    ) -> Callable[[Handler], Handler]:
        """Register the decorated function as the handler of job type `name`.

        `transactional=True`: called as fn(job, conn) inside a transaction that also holds
        the job's fenced success. `batch_size=N`: called as fn(batch) with up to N jobs.
        `timeout=S`: the handler is stopped after S seconds and the attempt fails;
        `isolation="process"` runs each call in a child process, killed at the timeout.
        `flow_keys=["shop:{shop}"]`: each job's flow keys, filled from its payload.
        """
        key_templates = flow.templates(flow_keys)
        # Validate the defaults now, so a bad decorator fails at import rather than at enqueue.
        validation.job_spec(
            name,
            {},
            queue=queue,
            max_attempts=max_attempts,
            lease_seconds=lease_seconds,
            timeout=timeout,
            priority=priority,
            backoff_policy=backoff,
        )
        policy = None if backoff is None else validation.backoff(backoff)
        if step_seconds is not None:
            step_seconds = validation.number(
                step_seconds, "step_seconds", 0.001, validation.MAX_LEASE_SECONDS
            )

        _handler_mode(transactional, batch_size, step_seconds)
        _isolation_mode(isolation, timeout, transactional, batch_size, step_seconds)
        opted = event_statuses(events)

        def register(fn: Handler) -> Handler:
            existing = self.tasks.get(name)
            if existing is not None and existing.fn is not fn:
                raise ConfigurationError(
                    f"job type {name!r} already has a handler: {_where(existing.fn)}"
                )
            is_async = inspect.iscoroutinefunction(fn)
            if is_async and transactional:
                raise ConfigurationError(
                    f"job type {name!r}: transactional handlers are plain functions "
                    "fn(job, conn) (a psycopg connection is not awaitable); make it a def"
                )
            if isolation == "process" and (is_async or not _importable(fn)):
                raise ConfigurationError(
                    f"job type {name!r}: isolation='process' runs a plain function defined at "
                    f"a module's top level (the child imports it by name), got {_where(fn)}"
                )
            self.tasks[name] = Task(
                name,
                fn,
                is_async,
                queue,
                max_attempts,
                lease_seconds,
                priority,
                policy,
                step_seconds,
                transactional,
                batch_size,
                opted,
                timeout,
                isolation,
                key_templates,
            )
            return fn

        return register

    def get(self, name: str) -> Task | None:
        return self.tasks.get(name)

    def needs_catalog(self, types: Iterable[Any]) -> bool:
        """Whether a request of these types needs the task catalogue: one names a type this
        registry has no handler for (a registered type takes its task's own settings), so an
        enqueue of registered types reads nothing more."""
        return any(not (isinstance(type_, str) and type_ in self.tasks) for type_ in types)

    def names(self) -> list[str]:
        return sorted(self.tasks)

    def spec(
        self,
        type: Any,
        payload: Any = None,
        *,
        catalog: Mapping[str, Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> JobSpec:
        """Validate a request, filling what it leaves out from the task's defaults: the
        registered task's, else the task catalogue's (`catalog`, type -> defaults as
        queue_core.model.catalog publishes them), for a process without the handler's module.

        The known types are the registered and the catalogued ones: an unknown type is
        refused once there are any (unless TICKQ_ACCEPT_UNKNOWN_TYPES is on); a registry
        with none and an empty catalogue (an enqueue-only service) accepts any well-formed
        type.
        """
        task = self.tasks.get(type) if isinstance(type, str) else None
        defaults: Mapping[str, Any] = {}
        templates: Sequence[str] = ()
        if task is not None:
            templates = task.flow_keys
            defaults = {
                "queue": task.queue,
                "max_attempts": task.max_attempts,
                "lease_seconds": task.lease_seconds,
                "timeout": task.timeout,
                "priority": task.priority,
                "backoff_policy": task.backoff,
            }
        elif catalog and isinstance(type, str) and type in catalog:
            published = catalog[type]
            defaults = {
                "queue": published.get("queue"),
                "max_attempts": published.get("max_attempts"),
                "lease_seconds": published.get("lease_seconds"),
                "timeout": published.get("timeout"),
                "priority": published.get("priority"),
                "backoff_policy": published.get("backoff"),
            }
            templates = published.get("flow_key_templates") or ()
        for key, value in defaults.items():
            if options.get(key) is None:
                options[key] = value
        known: Collection[str] | None = None
        if (self.tasks or catalog) and not accepts_unknown_types():
            known = set(self.tasks) | set(catalog or ())
        spec = validation.job_spec(type, payload, known_types=known, **options)
        if templates:
            filled = flow.fill(templates, json.loads(spec.payload_json))
            flow.combined(spec.flow_keys, filled)  # at most MAX_KEYS in all
            spec = replace(spec, task_flow_keys=filled)
        return spec

    def batch(
        self,
        requests: Iterable[Mapping[str, Any]],
        *,
        catalog: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> JobBatch:
        """Validate many requests (dicts of spec's arguments) as `spec` would one by one:
        the same verdicts, with the same messages.

        The common request, a plain dict of type, payload and idempotency key, is checked
        against its type's defaults, validated once per type: a batch then pays per job
        only for the payload and the key.
        """
        typed: dict[str, JobSpec] = {}
        bases: list[JobSpec] = []
        texts: list[str] = []
        keys: list[str | None] = []
        for request in requests:
            type_ = request.get("type") if type(request) is dict else None
            if (
                type(type_) is not str
                or not request.keys() <= _PLAIN_REQUEST
                or self._has_templates(type_, catalog)  # keys per payload: the spec's path
            ):
                spec = self.spec(**dict(request), catalog=catalog)
                bases.append(spec)
                texts.append(spec.payload_json)
                keys.append(spec.idempotency_key)
                continue
            base = typed.get(type_)
            if base is None:
                base = typed[type_] = self.spec(type_, catalog=catalog)
            bases.append(base)
            payload = request.get("payload")
            texts.append(base.payload_json if payload is None else payloads.encode(payload))
            key = request.get("idempotency_key")
            keys.append(
                None if key is None else validation.text(key, "idempotency_key", validation.MAX_KEY)
            )
        return JobBatch(bases, texts, keys)

    def _has_templates(self, type_: str, catalog: Mapping[str, Mapping[str, Any]] | None) -> bool:
        task = self.tasks.get(type_)
        if task is not None:
            return bool(task.flow_keys)
        return bool(catalog and (catalog.get(type_) or {}).get("flow_key_templates"))

    def load_modules(self, modules: Iterable[str]) -> None:
        """Import handler modules (e.g. from TICKQ_TASK_MODULES) so their @task calls run."""
        for module in modules:
            module = module.strip()
            if not module:
                continue
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise ConfigurationError(
                    f"cannot import task module {module!r} (from TICKQ_TASK_MODULES): {exc}"
                ) from exc


def _handler_mode(transactional: Any, batch_size: Any, step_seconds: float | None) -> None:
    """Refuse a handler mode that cannot hold its guarantee, at import time."""
    if not isinstance(transactional, bool):
        raise ConfigurationError(f"transactional must be True or False, got {transactional!r}")
    if batch_size is None:
        return
    validation.integer(batch_size, "batch_size", 1, MAX_HANDLER_BATCH)
    if transactional:
        raise ConfigurationError(
            "a task cannot be both transactional and batched: a batch's jobs settle one by "
            "one (batch.fail, batch.retry_after), one transaction could only commit or roll "
            "back them all"
        )
    if step_seconds is not None:
        raise ConfigurationError(
            "batch handlers cannot use durable steps (step_seconds): a step belongs to one "
            "job, and a suspension would leave the rest of the batch"
        )


def _isolation_mode(
    isolation: Any,
    timeout: int | None,
    transactional: bool,
    batch_size: Any,
    step_seconds: float | None,
) -> None:
    """A child process gets the payload, the id and the attempt, nothing that needs the
    runner's connection: no transaction, batch or durable steps there. A timeout stops one
    handler call of one job: not a transaction's commit, nor a batch of jobs."""
    if timeout is not None and (transactional or batch_size is not None):
        raise ConfigurationError(
            "a timeout cannot be combined with transactional or batch_size: it stops one "
            "call of one job, and a transaction or a batch could not fail apart"
        )
    if isolation not in ISOLATIONS:
        raise ConfigurationError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
    if isolation == "process" and (transactional or batch_size is not None or step_seconds):
        raise ConfigurationError(
            "isolation='process' cannot be combined with transactional, batch_size or "
            "step_seconds: the child process has no connection to the queue"
        )


def _importable(fn: Handler) -> bool:
    """Whether a child process can find `fn` again by its module and name."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    return bool(module) and module != "__main__" and "<" not in qualname and "." not in qualname


def _where(fn: Handler) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"


registry = Registry()
task = registry.task
