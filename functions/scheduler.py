"""SchedulerFunction: enqueue one job per due cron occurrence, never two.

Overlapping runs are safe: queue_core locks each due schedule (SKIP LOCKED) and moves it
past the occurrence in the same transaction as the enqueue.

Environment:
  TICKQ_DATABASE_URL or TICKQ_DB_SECRET_ARN   the worker login (member of tickq_worker)
  TICKQ_PREPARE_THRESHOLD "off" behind RDS Proxy
  TICKQ_KICK_FUNCTION     TickFunction's name: run fired jobs now, not at the next tick
Event: anything (schedules send {"source": "tickq.scheduler"}); it is not read.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from queue_core.policies.schedules import Schedules
from tickq.functions import db
from tickq.functions.aws import RETURN_RESERVE_MS, time_left_of
from tickq.functions.observability import log_metrics, logger, metrics, tracer
from tickq.functions.runtime import kick_tick

COUNTERS = ("due", "fired", "skipped", "passed_over", "failed", "busy")


@logger.inject_lambda_context(clear_state=True)
@log_metrics
@tracer.capture_lambda_handler
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    report = Schedules(db.connection()).run()
    for name in COUNTERS:
        metrics.add_metric(
            name=f"schedules_{name}", unit=MetricUnit.Count, value=getattr(report, name)
        )
    if report.errors:
        logger.error("schedules failed to fire", extra={"errors": report.errors})
    if report.fired:
        kick_tick(time_left_of(context, RETURN_RESERVE_MS))
    answer = report.as_dict()
    logger.info("scheduler finished", extra={"report": answer})
    return answer
