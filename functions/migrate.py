"""MigrateFunction: a CloudFormation custom resource that applies tickq's migrations.

Create and Update migrate (idempotent: applied versions are recorded); Delete does nothing,
since dropping a queue's data with its stack would be a disaster. The answer is PUT to the
request's pre-signed ResponseURL by this code itself; every path answers, because a custom
resource that never answers holds the stack for an hour.

Environment:
  TICKQ_DATABASE_URL or TICKQ_DB_SECRET_ARN   a login that owns the schema and may create
                                              roles (the database's admin secret)
  TICKQ_TASK_MODULES                          handler modules whose task settings to publish
                                              to the task catalogue (optional)
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from queue_core.migrate import migrate
from queue_core.postgres import catalog
from tickq.functions import db
from tickq.functions.observability import logger
from tickq.functions.runtime import tasks

PHYSICAL_ID = "tickq-schema"
RESPONSE_TIMEOUT = 10
REQUIRED = ("RequestType", "ResponseURL", "StackId", "RequestId", "LogicalResourceId")


@logger.inject_lambda_context(clear_state=True)
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    if not isinstance(event, Mapping) or any(not event.get(k) for k in REQUIRED):
        # Without a ResponseURL there is nobody to answer; say so and stop.
        missing = [k for k in REQUIRED if not isinstance(event, Mapping) or not event.get(k)]
        logger.error("not a custom resource event", extra={"missing": missing})
        return {"Status": "FAILED", "Reason": f"missing {', '.join(missing)}"}
    status, reason, data = "SUCCESS", "", {}
    try:
        if event["RequestType"] in ("Create", "Update"):
            applied = migrate(db.connection())
            data = {"Applied": ",".join(applied) or "none"}
            logger.info("migrations applied", extra={"applied": applied})
            # The deploy's task settings, when the function names the handler modules:
            # enqueuers without them get the tasks' own settings from the first job on.
            published = catalog.publish(db.connection(), tasks())
            if published:
                data["Tasks"] = ",".join(published)
    except Exception as exc:  # any failure must still reach CloudFormation
        db.discard()
        logger.exception("migration failed")
        status, reason = "FAILED", f"{type(exc).__name__}: {exc}"[:3000]
    answer = {
        "Status": status,
        "Reason": reason or f"see CloudWatch log stream {context.log_stream_name}",
        "PhysicalResourceId": event.get("PhysicalResourceId") or PHYSICAL_ID,
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "Data": data,
    }
    send(event["ResponseURL"], answer)
    return answer


def send(url: str, answer: Mapping[str, Any]) -> None:
    """PUT the answer; the pre-signed URL was signed without a content type, so send none."""
    body = json.dumps(answer).encode()
    request = urllib.request.Request(
        url, data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
    )
    with urllib.request.urlopen(request, timeout=RESPONSE_TIMEOUT) as response:
        logger.info("custom resource answered", extra={"http_status": response.status})
