"""TickFunction: reclaim expired leases, then claim → run → persist batches until the queue is
drained or the invocation's remaining time falls under the safety margin.

Environment:
  TICKQ_DATABASE_URL or TICKQ_DB_SECRET_ARN   the worker login (member of tickq_worker)
  TICKQ_TASK_MODULES        comma-separated handler modules to import
  TICKQ_QUEUES, TICKQ_BATCH_SIZE, TICKQ_CONCURRENCY, TICKQ_LEASE_SECONDS  (queue_core Settings)
  TICKQ_PREPARE_THRESHOLD   "off" behind RDS Proxy
  TICKQ_SAFETY_MARGIN_MS    stop claiming when less time than this remains (default 10000);
                            an AWS call during the drain (the fan-out) never eats into it
  TICKQ_MAX_FANOUT          how many hops of self-invocation a deep backlog may start
                            (default 0: no fan-out; Lambda stops loops after 16 hops anyway)
  TICKQ_EVENT_BUS           EventBridge bus the outbox's events go to (optional; without it
                            they wait in the outbox)
  TICKQ_MAX_ABANDONED_HANDLERS  past this many plain handlers abandoned at their timeout
                            and still running, the tick stops claiming (default 8)
Event: {} or {"fanout_depth": n, "queues": [...], "max_batches": n}; other keys are ignored,
so schedule inputs may carry their own markers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from queue_core import ConfigurationError, InvalidJob, Registry, Runner, TickReport
from queue_core.config import env_int
from queue_core.errors import DatabaseError
from queue_core.model.catalog import pinned_version
from queue_core.model.validation import integer, name
from queue_core.postgres import catalog
from queue_core.postgres.transactional import HandlerConnections
from tickq.functions import db
from tickq.functions.aws import RETURN_RESERVE_MS, invoke_async, publish_outbox, time_left_of
from tickq.functions.http.errors import BadRequest, problem
from tickq.functions.observability import log_metrics, logger, record_tick, tracer
from tickq.functions.runtime import settings, store, tasks

# Transactional handlers' connections, one per handler running at a time, opened as the
# environment's own (the current secret, a fresh IAM token) on the first such job and kept
# for the warm environment's life, as its shared connection is.
_handler_connections = HandlerConnections(db.new_connection)

MAX_FANOUT_HOPS = 15


@dataclass(frozen=True, slots=True)
class TickRequest:
    fanout_depth: int = 0
    queues: tuple[str, ...] | None = None
    max_batches: int | None = None


# Whether this container has published its registry's task settings (queue_core.model.catalog):
# once, on its first tick, so a deploy's settings reach every enqueuer.
_published: list[bool] = []


def _publish_once(registry: Registry) -> None:
    if _published:
        return
    try:
        catalog.publish(db.connection(), registry)
    except DatabaseError as exc:  # the tick runs all the same; the next container tries again
        db.discard()
        logger.warning("task settings not published", extra={"error": str(exc)})
        return
    _published.append(True)


@logger.inject_lambda_context(clear_state=True)
@log_metrics
@tracer.capture_lambda_handler
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    try:
        request = parse_event(event)
    except BadRequest as exc:
        logger.warning("malformed tick event", extra={"error": str(exc)})
        return problem(exc).body()
    config = settings()
    margin_ms = env_int("TICKQ_SAFETY_MARGIN_MS", 10_000, 0, 900_000)
    max_fanout = env_int("TICKQ_MAX_FANOUT", 0, 0, MAX_FANOUT_HOPS)
    registry = tasks()
    check_leases(config.lease_seconds, registry, context.get_remaining_time_in_millis(), margin_ms)
    _publish_once(registry)
    runner = Runner(
        store(pin_version=pinned_version(registry)),
        registry,
        queues=request.queues or config.queues,
        batch_size=config.batch_size,
        concurrency=config.concurrency,
        lease_seconds=config.lease_seconds,
        # Durable steps suspend before a step that would end past the safety margin.
        time_left=lambda: (context.get_remaining_time_in_millis() - margin_ms) / 1000,
        transactions=_handler_connections,
        # Past this many abandoned handler threads the tick claims no more (the report says
        # abandoned_past_bound); the next tick starts with a runner of its own.
        max_abandoned=config.max_abandoned_handlers,
    )

    def fan_out() -> bool:
        if request.fanout_depth >= max_fanout:
            return False
        follow_up = {"fanout_depth": request.fanout_depth + 1, "queues": runner.queues}
        return invoke_async(
            context.invoked_function_arn, follow_up, time_left=time_left_of(context, margin_ms)
        )

    with runner:
        report, fanned = drain(
            runner,
            lambda: context.get_remaining_time_in_millis() > margin_ms,
            fan_out,
            request.max_batches,
        )
    record_tick(report)
    # After the drain the margin has done its job (room for the last batch): the outbox's
    # events may use what is left but the time to return.
    published = publish_outbox(
        db.connection(), time_left=time_left_of(context, min(margin_ms, RETURN_RESERVE_MS))
    )
    outcome = {
        **report.as_dict(),
        "fanned_out": fanned,
        "fanout_depth": request.fanout_depth,
        "events": published.as_dict(),
    }
    logger.info("tick finished", extra={"report": outcome})
    return outcome


def check_leases(default_seconds: int, registry: Registry, budget_ms: int, margin_ms: int) -> None:
    """Refuse a tick whose leases (the environment's, or a task's own) could end while the
    function still runs: a job running at the timeout would then be claimed twice."""
    rule = (
        f"must be longer than the function timeout ({budget_ms / 1000:.0f} s) plus the "
        f"safety margin ({margin_ms} ms), or a job still running at the timeout could be "
        "claimed twice"
    )
    if default_seconds * 1000 <= budget_ms + margin_ms:
        raise ConfigurationError(f"TICKQ_LEASE_SECONDS ({default_seconds} s) {rule}")
    short = [
        f"task {t.name!r} has lease_seconds={t.lease_seconds}"
        for t in (registry.tasks[n] for n in registry.names())
        if t.lease_seconds is not None and t.lease_seconds * 1000 <= budget_ms + margin_ms
    ]
    if short:
        raise ConfigurationError(f"{'; '.join(short)}: a task's lease {rule}")


def drain(
    runner: Runner,
    time_left: Callable[[], bool],
    fan_out: Callable[[], bool],
    max_batches: int | None = None,
) -> tuple[TickReport, int]:
    """Reclaim, then run jobs while time is left; after the first full claim (a backlog),
    ask `fan_out` for help, once: a fan-out that failed is not tried again, since an endpoint
    that did not answer would cost the same time again. Returns the report and how many
    copies were started."""
    fanned = 0
    asked = False

    def after_batch(claimed: int) -> None:
        nonlocal fanned, asked
        if claimed >= min(runner.batch_size, runner.concurrency) and not asked:
            asked = True
            fanned = int(fan_out())

    # A lost connection is reopened while time is left: the outcomes it kept from being
    # saved are sent again on the new one rather than left to expire.
    report = runner.tick(
        should_continue=time_left,
        max_batches=max_batches,
        after_batch=after_batch,
        reconnect=store,
    )
    return report, fanned


def parse_event(event: Any) -> TickRequest:
    if event is None:
        return TickRequest()
    if not isinstance(event, Mapping):
        raise BadRequest(f"the tick event must be a JSON object, got {type(event).__name__}")
    try:
        depth = integer(event.get("fanout_depth", 0), "fanout_depth", 0, MAX_FANOUT_HOPS + 1)
        queues = event.get("queues")
        if queues is not None:
            if not isinstance(queues, list) or not queues:
                raise BadRequest("queues must be a non-empty list of queue names")
            queues = tuple(name(q, "queues") for q in queues)
        batches = event.get("max_batches")
        if batches is not None:
            batches = integer(batches, "max_batches", 1, 1_000_000)
    except InvalidJob as exc:
        raise BadRequest(f"invalid tick event: {exc}") from None
    return TickRequest(depth, queues, batches)
