"""Logs, metrics and traces shared by every handler (Powertools).

Logs are JSON with the job id, type and attempt that queue_core attaches to its records;
metrics are CloudWatch embedded metric format in namespace "tickq"; traces go to X-Ray
when the stack enables tracing (TICKQ_TRACING=Active). Without it the X-Ray SDK is not even
imported: it is the largest single piece of a cold start (about 0.3-0.5 s).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from queue_core import TickReport, telemetry
from queue_core.model.fairness import GroupStats, most_starved
from queue_core.policies.outbox import Backlog
from queue_core.runner.report import TICK_COUNTERS
from queue_core.store.port import StatsRow

NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "tickq"

# The alarms in template.yaml select metrics by this service dimension.
SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "tickq"

# Powertools names its logger after the service: with "tickq" that is queue_core's own
# logger, so the engine's job_id / job_type / attempt extras become keys of the JSON lines.
logger = Logger(service=SERVICE)
if not os.environ.get("LAMBDA_TASK_ROOT"):  # set by the Lambda runtime alone
    # Elsewhere the host process (the CLI, a test run) decides where records go; a JSON
    # handler of our own would write into its stdout.
    logging.getLogger(logger.name).removeHandler(logger.registered_handler)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)


class _Untraced:
    """Stands in for Powertools' Tracer when tracing is off: decorators return the handler."""

    def capture_lambda_handler(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        return handler


def _tracer() -> Any:
    if os.environ.get("TICKQ_TRACING", "PassThrough") != "Active":
        return _Untraced()
    from aws_lambda_powertools import Tracer

    return Tracer()


tracer = _tracer()


Handler = TypeVar("Handler", bound=Callable[..., Any])


def log_metrics(handler: Handler) -> Handler:
    """Powertools' `log_metrics`, but flushing only when the invocation added a metric: a
    request that only reads (GET /jobs) adds none, which is expected, and Powertools warns
    on every empty flush."""

    @functools.wraps(handler)
    def flushing(event: Any, context: Any) -> Any:
        try:
            return handler(event, context)
        finally:
            if metrics.metric_set:
                metrics.flush_metrics()
            else:
                metrics.clear_metrics()  # dimensions or metadata added without a metric

    return cast(Handler, flushing)


def continue_trace(
    carrier: Callable[[Any], Mapping[str, str] | None],
) -> Callable[[Handler], Handler]:
    """With OpenTelemetry on, run the handler in the trace its event names (`carrier`
    finds the W3C traceparent in it), so the jobs it enqueues record the caller's trace.
    Off, a call pays one cached test and imports nothing."""

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def continuing(event: Any, context: Any) -> Any:
            if not telemetry.active():
                return handler(event, context)
            with telemetry.get().continuing(carrier(event)):
                return handler(event, context)

        return cast(Handler, continuing)

    return decorate


def http_trace_headers(event: Any) -> Mapping[str, str] | None:
    """The W3C trace headers of an HTTP API (v2) event (lower-case names), without the
    spaces or tabs around a value, which HTTP does not count as part of it. A traceparent
    that is not valid, repeated ones joined by a comma included, is ignored with its
    tracestate: the request starts a trace of its own (telemetry.valid_traceparent)."""
    headers = event.get("headers") if isinstance(event, Mapping) else None
    if not isinstance(headers, Mapping):
        return None
    found = {
        k: v.strip(" \t")
        for k in ("traceparent", "tracestate")
        if isinstance(v := headers.get(k), str)
    }
    return found if telemetry.valid_traceparent(found.get("traceparent")) else None


def record_tick(report: TickReport) -> None:
    """Add a tick's counters and duration to the invocation's metrics."""
    for name in TICK_COUNTERS:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=getattr(report, name))
    # A gauge: handler threads abandoned at their timeout that still run in this container.
    metrics.add_metric(
        name="abandoned_handlers", unit=MetricUnit.Count, value=report.abandoned_handlers
    )
    metrics.add_metric(name="tick_duration", unit=MetricUnit.Seconds, value=report.duration_seconds)


def record_depth(rows: Iterable[StatsRow]) -> dict[tuple[str, str], dict[str, float]]:
    """Emit queue depth (runnable jobs: suspended ones wait for a signal, a sleep or their
    children, flow-held ones for their flow key), suspended jobs, jobs waiting for parents,
    flow-held jobs and oldest-runnable age (flow-held ones left out) per queue and type;
    returns what was sent."""
    waiting: dict[tuple[str, str], dict[str, float]] = {}
    for row in rows:
        entry = waiting.setdefault(
            (row.queue, row.type),
            {"depth": 0, "suspended": 0, "waiting": 0, "flow_held": 0, "oldest_age": 0.0},
        )
        if row.status.value in ("queued", "retrying"):
            entry["depth"] += row.runnable
            entry["suspended"] += row.suspended
            entry["flow_held"] += row.flow_held
        elif row.status.value == "waiting":
            entry["waiting"] += row.count
        if row.oldest_runnable_seconds is not None:
            entry["oldest_age"] = max(entry["oldest_age"], row.oldest_runnable_seconds)
    otel = telemetry.get() if telemetry.active() else None
    for (queue, type_), values in waiting.items():
        if otel is not None:
            otel.record_depth(queue, type_, values["depth"], values["oldest_age"])
        _single("queue_depth", MetricUnit.Count, values["depth"], queue, type_)
        _single("suspended_jobs", MetricUnit.Count, values["suspended"], queue, type_)
        _single("waiting_for_parents", MetricUnit.Count, values["waiting"], queue, type_)
        _single("flow_held_jobs", MetricUnit.Count, values["flow_held"], queue, type_)
        _single("oldest_runnable_age", MetricUnit.Seconds, values["oldest_age"], queue, type_)
    # Totals on the service dimension alone, for alarms that must not list every queue.
    total = sum(v["depth"] for v in waiting.values())
    oldest = max((v["oldest_age"] for v in waiting.values()), default=0.0)
    metrics.add_metric(name="queue_depth_total", unit=MetricUnit.Count, value=total)
    held = sum(v["flow_held"] for v in waiting.values())
    metrics.add_metric(name="flow_held_total", unit=MetricUnit.Count, value=held)
    metrics.add_metric(name="oldest_runnable_age_max", unit=MetricUnit.Seconds, value=oldest)
    return waiting


def record_backlog(backlog: Backlog) -> None:
    """Emit the outbox's backlog: events waiting to be published and the oldest one's age
    (0 when none waits). The alarm on the age catches an event bus that stopped taking."""
    metrics.add_metric(name="outbox_pending", unit=MetricUnit.Count, value=backlog.pending)
    metrics.add_metric(
        name="outbox_oldest_age", unit=MetricUnit.Seconds, value=backlog.oldest_seconds or 0.0
    )


def record_starved(groups: Sequence[GroupStats]) -> GroupStats | None:
    """Emit how long the most starved fairness group's oldest runnable job has waited (0
    when nothing waits): an alarm on it catches a tenant left behind by the others."""
    starved = most_starved(groups)
    age = 0.0 if starved is None else starved.oldest_runnable_seconds or 0.0
    metrics.add_metric(name="most_starved_group_age", unit=MetricUnit.Seconds, value=age)
    return starved


def _single(name: str, unit: MetricUnit, value: float, queue: str, type_: str) -> None:
    # Each (queue, type) pair needs its own dimension set, hence one EMF blob per value.
    with single_metric(name=name, unit=unit, value=value, namespace=NAMESPACE) as metric:
        metric.add_dimension(name="queue", value=queue)
        metric.add_dimension(name="type", value=type_)
