"""MaintenanceFunction: a reclaim pass, so expired leases come back even while no tick
runs (a lost connection is reopened while time is left, as a tick does); the outbox's
pending events published (queue_core/policies/outbox.py), its published ones pruned and its
backlog's size and age as metrics; the partitions of finished jobs for the
next days (queue_core/policies/partitions.py), and a partition for any day found in the default
one; retention pruning by the stored policies, within the invocation's time; queue depth
and oldest-runnable-age metrics per queue and type, and the oldest-runnable age of the most
starved fairness group; the depth is also kept as a sample per queue for the operator
view's depth chart (tickq.queue_depth_samples, two days of them).

Environment:
  TICKQ_DATABASE_URL or TICKQ_DB_SECRET_ARN   the worker login (member of tickq_worker)
  TICKQ_PREPARE_THRESHOLD "off" behind RDS Proxy
  TICKQ_EVENT_BUS         EventBridge bus the outbox's events go to (optional)
  TICKQ_OUTBOX_RETENTION  how long published events are kept (default 7d; 30d, 12h, ...)
  TICKQ_SAFETY_MARGIN_MS  stop pruning, and reconnecting, when less time than this remains
                          (default 10000)
Event: anything (schedules send {"source": "tickq.maintenance"}); it is not read.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from queue_core import Runner, TickReport
from queue_core.config import env_int
from queue_core.console.charts import QueueHistory
from queue_core.policies import partitions
from queue_core.policies.outbox import Outbox, outbox_retention_seconds
from queue_core.policies.retention import Retention
from tickq.functions import db
from tickq.functions.aws import publish_outbox, time_left_of
from tickq.functions.observability import (
    log_metrics,
    logger,
    metrics,
    record_backlog,
    record_depth,
    record_starved,
    tracer,
)
from tickq.functions.runtime import store, tasks


@logger.inject_lambda_context(clear_state=True)
@log_metrics
@tracer.capture_lambda_handler
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    margin_ms = env_int("TICKQ_SAFETY_MARGIN_MS", 10_000, 0, 900_000)

    def time_left() -> bool:
        return context.get_remaining_time_in_millis() > margin_ms

    runner = Runner(store(), tasks())
    report = TickReport()
    # A lost connection is reopened while time is left, on the worker's short interval.
    runner.reclaim_surviving(report, should_continue=time_left, reconnect=store)
    queue = runner.store  # the reconnect's, when there was one
    metrics.add_metric(name="reclaimed", unit=MetricUnit.Count, value=report.reclaimed)
    metrics.add_metric(name="dead", unit=MetricUnit.Count, value=report.dead)
    margin_ms = env_int("TICKQ_SAFETY_MARGIN_MS", 10_000, 0, 900_000)
    published = publish_outbox(db.connection(), time_left=time_left_of(context, margin_ms))
    created = partitions.ensure(db.connection())
    metrics.add_metric(name="partitions_created", unit=MetricUnit.Count, value=created)
    pruned = Retention(db.connection()).prune(should_continue=time_left)
    metrics.add_metric(name="pruned", unit=MetricUnit.Count, value=pruned.deleted)
    events_pruned = Outbox(db.connection()).prune(
        max_age_seconds=outbox_retention_seconds(),
        should_continue=lambda: context.get_remaining_time_in_millis() > margin_ms,
    )
    backlog = Outbox(db.connection()).backlog()
    record_backlog(backlog)
    rows = queue.stats()
    depth = record_depth(rows)
    sampled = QueueHistory(db.connection()).record_depth(rows)  # the operator view's depth chart
    starved = record_starved(queue.group_stats())
    answer = {
        "reclaimed": report.reclaimed,
        "dead": report.dead,
        "events": published.as_dict(),
        "events_pruned": events_pruned,
        "outbox": backlog.as_dict(),
        "partitions_created": created,
        "pruned": pruned.as_dict(),
        "queues": [{"queue": q, "type": t, **values} for (q, t), values in sorted(depth.items())],
        "depth_samples": sampled,
        "most_starved_group": None if starved is None else starved.as_dict(),
    }
    logger.info("maintenance finished", extra={"report": answer})
    return answer
