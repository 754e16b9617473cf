"""EnqueueFunction: other functions of the account enqueue jobs by invoking this directly.

Event: {"type": ..., "payload": {...}, ...options} or {"jobs": [request, ...]}, either with
an optional "traceparent" (the caller's W3C trace context, for OpenTelemetry; one that is
not a valid W3C traceparent is refused like any bad input, null is none); options are
those of POST /jobs plus "user_id"; in "jobs", "after" may also name the position of an
earlier request, so a whole graph is enqueued by one event (a parent must have the same
owner). Answer: {"jobs": [{"id", "status", "duplicate", "debounced"}, ...]}; "debounce" and
"throttle" are those of POST /jobs ({"key", "seconds", "max_seconds"}).
Bad input is answered ({"error", "message", ...}, with "index" in a batch) rather than raised, so an
asynchronous caller's retries do not repeat it; database failures are raised and retried.
Every request of a batch is checked before any is written, so a bad one writes nothing.

Environment:
  TICKQ_DATABASE_URL or TICKQ_DB_SECRET_ARN   a login allowed to enqueue for any user
  TICKQ_TASK_MODULES      handler modules, for per-type defaults and type checks (optional)
  TICKQ_PREPARE_THRESHOLD "off" behind RDS Proxy
  TICKQ_KICK_FUNCTION     TickFunction's name: start a tick right after (optional)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from queue_core import DatabaseError, InvalidJob, JobBatch, JobSpec, telemetry
from queue_core.model import dependencies
from tickq.functions import db
from tickq.functions.aws import RETURN_RESERVE_MS, time_left_of
from tickq.functions.http.errors import BadRequest, problem
from tickq.functions.http.requests import TrustedEnqueueRequest, parse
from tickq.functions.observability import continue_trace, log_metrics, logger, metrics, tracer
from tickq.functions.runtime import kick_tick, store, task_catalog, tasks

MAX_JOBS_PER_EVENT = 1000
# The event key under which an invoking function passes its trace context (W3C traceparent).
TRACE_KEY = "traceparent"


def event_traceparent(event: Any) -> Mapping[str, str] | None:
    """The caller's trace context the event carries, if any and valid (an invalid one is
    refused by the handler, and never continued)."""
    found = event.get(TRACE_KEY) if isinstance(event, Mapping) else None
    return {"traceparent": found} if telemetry.valid_traceparent(found) else None


@logger.inject_lambda_context(clear_state=True)
@log_metrics
@tracer.capture_lambda_handler
@continue_trace(event_traceparent)
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    index: int | None = None
    batch = False
    try:
        requests, batch = _requests(event)
        specs: list[JobSpec] = []
        after: list[tuple[dependencies.ParentRef, ...]] = []
        registry = tasks()
        catalog = task_catalog(r.get("type") if isinstance(r, Mapping) else None for r in requests)
        for index, request in enumerate(requests):
            parsed = parse(TrustedEnqueueRequest, request, f"jobs[{index}]" if batch else "event")
            specs.append(parsed.spec(registry, catalog=catalog))
            after.append(dependencies.graph_parents(parsed.after, position=index))
        index = None
        if any(after):  # a graph: "after" names job ids or earlier positions of this event
            results = store().enqueue_after(JobBatch.of(specs), after)
        else:
            results = store().enqueue_many(specs)
    except (BadRequest, InvalidJob) as exc:
        logger.warning("enqueue refused", extra={"error": str(exc), "index": index})
        answer = problem(exc).body()
        return {**answer, "index": index} if batch and index is not None else answer
    except DatabaseError:
        db.discard()
        raise
    new = sum(not (r.duplicate or r.debounced) for r in results)
    metrics.add_metric(name="enqueued", unit=MetricUnit.Count, value=new)
    if new:
        kick_tick(time_left_of(context, RETURN_RESERVE_MS))
    jobs = [r.to_dict() for r in results]
    return {"jobs": jobs}


def _requests(event: Any) -> tuple[list[Any], bool]:
    """The event's requests, and whether it is a batch (errors then name the index)."""
    if not isinstance(event, Mapping):
        raise BadRequest(f"the event must be a JSON object, got {type(event).__name__}")
    if TRACE_KEY in event:  # the caller's trace, read by continue_trace
        if event[TRACE_KEY] is not None:
            telemetry.check_traceparent(event[TRACE_KEY], TRACE_KEY)
        event = {k: v for k, v in event.items() if k != TRACE_KEY}
    if "jobs" not in event:
        return [event], False
    if set(event) != {"jobs"}:
        raise BadRequest("an event with 'jobs' must carry nothing else")
    jobs = event["jobs"]
    if not isinstance(jobs, list) or not jobs:
        raise BadRequest("'jobs' must be a non-empty list of job requests")
    if len(jobs) > MAX_JOBS_PER_EVENT:
        raise BadRequest(f"'jobs' holds {len(jobs)} requests, over the limit of 1000")
    return jobs, True
