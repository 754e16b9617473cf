"""boto3 clients, created once per execution environment, and the two calls tickq makes.

`clients.cache_clear()` forgets them (tests do, so each test's moto mock is used).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import boto3  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

from queue_core.report import DeadLetter

from .observability import logger

EVENT_SOURCE = "tickq"
DEAD_DETAIL_TYPE = "Job Dead"
# put_events accepts at most 10 entries per call.
EVENTS_PER_CALL = 10

_CONFIG = Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 2})


@cache
def clients(service: str) -> Any:
    return boto3.client(service, config=_CONFIG)


def publish_dead_letters(letters: Iterable[DeadLetter]) -> int:
    """Put one `Job Dead` event per dead job on TICKQ_EVENT_BUS; returns how many went out.

    A failure to publish is logged, never raised: the jobs are already dead in the table,
    and the dead-jobs alarm does not depend on these events.
    """
    bus = os.environ.get("TICKQ_EVENT_BUS")
    entries = [
        {
            "Source": EVENT_SOURCE,
            "DetailType": DEAD_DETAIL_TYPE,
            "EventBusName": bus,
            "Detail": json.dumps(d.as_dict()),
        }
        for d in letters
    ]
    if not bus or not entries:
        return 0
    sent = 0
    for start in range(0, len(entries), EVENTS_PER_CALL):
        chunk = entries[start : start + EVENTS_PER_CALL]
        try:
            answer = clients("events").put_events(Entries=chunk)
        except (BotoCoreError, ClientError) as exc:
            logger.error("cannot publish dead-job events", extra={"error": str(exc)})
            continue
        sent += len(chunk) - int(answer.get("FailedEntryCount", 0))
    return sent


def invoke_async(function: str, payload: Mapping[str, Any]) -> bool:
    """Start `function` asynchronously (InvocationType=Event); False when Lambda refused."""
    try:
        answer = clients("lambda").invoke(
            FunctionName=function, InvocationType="Event", Payload=json.dumps(payload).encode()
        )
    except (BotoCoreError, ClientError) as exc:
        logger.warning("cannot invoke", extra={"function": function, "error": str(exc)})
        return False
    return int(answer.get("StatusCode", 0)) == 202
