"""MaintenanceFunction: queue depth and oldest-runnable-age metrics per queue and type, and
a reclaim pass, so expired leases come back even while no tick runs.

Environment:
  TICKQ_DATABASE_URL or TICKQ_DB_SECRET_ARN   the worker login (member of tickq_worker)
  TICKQ_PREPARE_THRESHOLD "off" behind RDS Proxy
  TICKQ_EVENT_BUS         EventBridge bus for "Job Dead" events of reclaimed jobs (optional)
Event: anything (schedules send {"source": "tickq.maintenance"}); it is not read.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from queue_core import Runner, TickReport

from .aws import publish_dead_letters
from .observability import logger, metrics, record_depth, tracer
from .runtime import store, tasks


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    queue = store()
    report = TickReport()
    Runner(queue, tasks()).reclaim(report)
    metrics.add_metric(name="reclaimed", unit=MetricUnit.Count, value=report.reclaimed)
    metrics.add_metric(name="dead", unit=MetricUnit.Count, value=report.dead)
    published = publish_dead_letters(report.dead_letters)
    depth = record_depth(queue.stats())
    answer = {
        "reclaimed": report.reclaimed,
        "dead": report.dead,
        "dead_events": published,
        "queues": [{"queue": q, "type": t, **values} for (q, t), values in sorted(depth.items())],
    }
    logger.info("maintenance finished", extra={"report": answer})
    return answer
