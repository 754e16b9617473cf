"""boto3 clients, created once per execution environment, and the calls tickq makes.

Every call is bounded: connect and read timeouts and a fixed number of attempts, and a
caller that has a deadline (a tick, a request) passes a `TimeLeft`, asked just before the
call, so a hung endpoint costs at most what was left. `CallLimits.within` turns those
seconds into timeouts; clients are cached per service and limits, and the limits are
rounded so that few distinct ones exist. `reset()` forgets the session and its clients
(tests do, so each test's moto mock is used).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Protocol

import boto3  # type: ignore[import-untyped]
import psycopg
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

from queue_core.policies.outbox import Event, PublishReport, Send, publish_pending
from tickq.functions.observability import logger

# Limits of one call when time is plentiful; a shorter budget shrinks them.
CONNECT_SECONDS = 2.0
READ_SECONDS = 5.0
MAX_ATTEMPTS = 2
# Below this per attempt a call is not worth making: it would time out on a healthy endpoint.
MIN_ATTEMPT_SECONDS = 0.5
_ROUNDING = 0.1  # limits are rounded down to this, so few distinct clients are made

# What a handler keeps of its invocation after its last AWS call: the time to log and return.
RETURN_RESERVE_MS = 1000

# Seconds an AWS call may still spend, asked just before it is made.
TimeLeft = Callable[[], float]


@dataclass(frozen=True, slots=True)
class CallLimits:
    """Timeouts and total attempts of one AWS call; `worst_seconds` is what a hung endpoint
    costs with them (every attempt timing out, plus the retry mode's backoff)."""

    connect: float = CONNECT_SECONDS
    read: float = READ_SECONDS
    attempts: int = MAX_ATTEMPTS

    @property
    def worst_seconds(self) -> float:
        return self.attempts * (self.connect + self.read) + _backoff_seconds(self.attempts)

    @classmethod
    def within(cls, seconds: float | None) -> CallLimits | None:
        """The largest limits whose worst case fits in `seconds` (None: no deadline, the
        defaults); None when not even one short attempt fits."""
        if seconds is None:
            return cls()
        for attempts in range(MAX_ATTEMPTS, 0, -1):
            per_attempt = (seconds - _backoff_seconds(attempts)) / attempts
            if per_attempt >= MIN_ATTEMPT_SECONDS:
                break
        else:
            return None
        share = CONNECT_SECONDS / (CONNECT_SECONDS + READ_SECONDS)
        connect = min(CONNECT_SECONDS, per_attempt * share)
        read = min(READ_SECONDS, per_attempt - connect)
        return cls(_round_down(connect), _round_down(read), attempts)

    def config(self) -> Config:
        return Config(
            connect_timeout=self.connect,
            read_timeout=self.read,
            retries={"mode": "standard", "total_max_attempts": self.attempts},
        )


def _backoff_seconds(attempts: int) -> float:
    # The standard retry mode sleeps up to 2^(n-1) s (at random) before the n-th retry
    # (a server's x-amz-retry-after may stretch that by 5 s; a hung endpoint sends none).
    return float(sum(2 ** (n - 1) for n in range(1, attempts)))


def _round_down(seconds: float) -> float:
    return math.floor(seconds / _ROUNDING) * _ROUNDING


class _Context(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


def time_left_of(context: _Context, reserve_ms: int = 0) -> TimeLeft:
    """Seconds an AWS call may spend of the invocation `context` when `reserve_ms` must stay
    untouched (a tick's safety margin), read afresh at each call."""
    return lambda: max(0.0, (context.get_remaining_time_in_millis() - reserve_ms) / 1000)


@cache
def session() -> boto3.Session:
    """One boto3 session per environment: a hook on its events reaches every client made
    after it was registered (tests record calls so)."""
    return boto3.Session()


@lru_cache(maxsize=32)
def clients(service: str, limits: CallLimits = CallLimits()) -> Any:
    return session().client(service, config=limits.config())


@cache
def secrets() -> Any:
    """Powertools' Secrets Manager provider (it caches values) on a client of ours, so a
    secret's fetch is bounded like any other call."""
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    return SecretsProvider(boto3_client=clients("secretsmanager"))


def reset() -> None:
    secrets.cache_clear()
    clients.cache_clear()
    session.cache_clear()


def publish_outbox(
    conn: psycopg.Connection[Any], *, time_left: TimeLeft | None = None
) -> PublishReport:
    """Publish the outbox's pending events to TICKQ_EVENT_BUS, each call within
    `time_left()`, until none is left or the time is (queue_core/policies/outbox.py: in
    order per job, the owners sharing the calls, calls sized to EventBridge's limits, retried
    with backoff, a refused event left pending for the next run). Without a bus, nothing."""
    bus = os.environ.get("TICKQ_EVENT_BUS")
    if not bus:
        return PublishReport()
    report = publish_pending(
        conn,
        eventbridge_sender(bus, time_left),
        time_left=None if time_left is None else lambda: time_left() - MIN_ATTEMPT_SECONDS,
    )
    if report.held:
        logger.error(
            "events left in the outbox for the next run", extra={"events": report.as_dict()}
        )
    return report


def eventbridge_sender(bus: str, time_left: TimeLeft | None = None) -> Send:
    """Put events on `bus`, one call for the events given (the publisher sizes its calls to
    EventBridge's limits, queue_core/policies/outbox.py): per event, None when EventBridge accepted
    it, else its reason. The event's stable id rides in its detail (`event_id`): a
    PutEvents entry has no id field of its own. The entries carry no Time and no Resources,
    which `Event.size` would have to count."""

    def send(events: Sequence[Event]) -> list[str | None]:
        limits = CallLimits.within(None if time_left is None else time_left())
        if limits is None:
            return ["no time left to publish"] * len(events)
        entries = [
            {
                "Source": e.source,
                "DetailType": e.detail_type,
                "EventBusName": bus,
                "Detail": e.body(),
            }
            for e in events
        ]
        try:
            answer = clients("events", limits).put_events(Entries=entries)
        except (BotoCoreError, ClientError) as exc:
            return [str(exc)] * len(events)
        results = answer.get("Entries") or []
        if len(results) != len(events):
            return ["EventBridge answered for another number of entries"] * len(events)
        return [
            None
            if r.get("EventId") and not r.get("ErrorCode")
            else f"{r.get('ErrorCode')}: {r.get('ErrorMessage')}"
            for r in results
        ]

    return send


def invoke_async(
    function: str, payload: Mapping[str, Any], *, time_left: TimeLeft | None = None
) -> bool:
    """Start `function` asynchronously (InvocationType=Event) within `time_left()`; False
    when Lambda refused, did not answer in time, or there was no time to ask."""
    limits = CallLimits.within(None if time_left is None else time_left())
    if limits is None:
        logger.warning("no time left to invoke", extra={"function": function})
        return False
    try:
        answer = clients("lambda", limits).invoke(
            FunctionName=function, InvocationType="Event", Payload=json.dumps(payload).encode()
        )
    except (BotoCoreError, ClientError) as exc:
        logger.warning("cannot invoke", extra={"function": function, "error": str(exc)})
        return False
    return int(answer.get("StatusCode", 0)) == 202
