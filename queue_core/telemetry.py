"""OpenTelemetry for tickq, behind the `otel` extra: nothing of it is imported or paid unless
it is on.

On (`TICKQ_OTEL=on`; by default, `auto`, when the process already imported the OpenTelemetry
API, as the ADOT Lambda layer's wrapper does): an enqueue records the caller's trace context
(W3C traceparent) on the job, through the transaction setting `tickq.traceparent` that the
column's default reads, so every insert path records it (`tickq.enqueue` and plain SQL take
the setting their caller made). Running the job is a consumer span parented by that
context, named after the type, with the messaging conventions' attributes; each durable step
is a child span, and each batch's claim and finish one span each (not one per job). Metrics:
jobs completed by type and outcome, job duration, queue depth and oldest runnable age.

Off, `active()` is one cached boolean and no OpenTelemetry module is loaded.

A trace context is taken only in the W3C form (`valid_traceparent`), on every path: a
request's header, EnqueueFunction's event, the current span an enqueue records, the value
a run reads back. One that is not is never continued: a header is ignored (the run starts
a trace of its own), as the W3C rules ask of a receiver, and an explicit argument is
refused (`check_traceparent`).
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, TypeGuard

from queue_core.errors import ConfigurationError, InvalidJob

__all__ = ["Telemetry", "active", "check_traceparent", "get", "reset", "valid_traceparent"]

SYSTEM = "tickq"
# The API module whose presence `auto` takes as the application using OpenTelemetry.
_API = "opentelemetry.trace"

_NO_SPAN: AbstractContextManager[None] = nullcontext()

# version-trace id-parent id-flags, lower-case hexadecimal only (an upper-case digit is
# not the same context spelled otherwise: it is not a traceparent).
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
_TRACEPARENT_LENGTH = 55
# OpenTelemetry's propagator ignores longer values; so, then, do we.
_TRACEPARENT_MAXIMUM = 512
_PRINTABLE = re.compile(r"[\x20-\x7e]*")


def valid_traceparent(value: object) -> TypeGuard[str]:
    """Whether `value` is a W3C traceparent a receiver continues: a version of two hex
    digits other than ff; a trace id of 32 hex digits, not all zeros; a parent id of 16,
    not all zeros; flags of two; all lower-case, dash-separated. Version 00 is exactly 55
    characters; a later version may go on after a further '-' (its fields are then read as
    version 00's). Surrounding spaces are not part of it: a header's are the caller's to
    strip (`http_trace_headers` does)."""
    if not isinstance(value, str) or not _TRACEPARENT_LENGTH <= len(value) <= _TRACEPARENT_MAXIMUM:
        return False
    found = _TRACEPARENT.fullmatch(value, 0, _TRACEPARENT_LENGTH)
    if found is None:
        return False
    version, trace_id, parent_id = found.groups()
    if version == "ff" or trace_id == "0" * 32 or parent_id == "0" * 16:
        return False
    if len(value) == _TRACEPARENT_LENGTH:
        return True
    tail = value[_TRACEPARENT_LENGTH:]
    return version != "00" and tail[0] == "-" and _PRINTABLE.fullmatch(tail) is not None


def check_traceparent(value: object, field: str = "traceparent") -> str:
    """`value` when it is a valid W3C traceparent (`valid_traceparent`); else InvalidJob
    naming `field`, for a trace context given explicitly (an argument, an event's key)."""
    if valid_traceparent(value):
        return value
    if not isinstance(value, str):
        raise InvalidJob(field, f"must be a W3C traceparent string, got {type(value).__name__}")
    raise InvalidJob(
        field,
        "must be a W3C traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, "
        "lower-case, ids not all zeros, version not ff "
        f"(got {value[:64]!r}{'...' if len(value) > 64 else ''})",
    )


class Telemetry:
    """The loaded OpenTelemetry API: the tracer, the meter and its instruments."""

    def __init__(self) -> None:
        try:
            from opentelemetry import metrics, trace
            from opentelemetry.trace.propagation.tracecontext import (
                TraceContextTextMapPropagator,
            )
        except ImportError:
            raise ConfigurationError(
                "TICKQ_OTEL=on needs OpenTelemetry: pip install 'tickq[otel]'"
            ) from None
        self._trace = trace
        self._propagator = TraceContextTextMapPropagator()
        self.tracer = trace.get_tracer("tickq")
        meter = metrics.get_meter("tickq")
        self.completed = meter.create_counter(
            "tickq.jobs.completed", unit="{job}", description="job runs ended, by type and outcome"
        )
        self.duration = meter.create_histogram(
            "tickq.job.duration", unit="s", description="how long a job's run took"
        )
        self.depth = meter.create_gauge(
            "tickq.queue.depth", unit="{job}", description="jobs ready to run, by queue and type"
        )
        self.oldest = meter.create_gauge(
            "tickq.queue.oldest_age",
            unit="s",
            description="how long the oldest runnable job has waited, by queue and type",
        )

    def traceparent(self) -> str | None:
        """The current span's context as a W3C traceparent; None outside any valid span
        (one whose trace or span id is zero, which the propagator would still write)."""
        if not self._trace.get_current_span().get_span_context().is_valid:
            return None
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        found = carrier.get("traceparent")
        return found if valid_traceparent(found) else None

    @contextmanager
    def recording(self, conn: Any) -> Iterator[None]:
        """Inserts on `conn` inside the block record the current trace context: the setting
        the jobs column's default reads, local to a transaction (the caller's, or one for
        the block), so no other statement or pooled client inherits it."""
        traceparent = self.traceparent()
        if traceparent is None:
            yield
            return
        with conn.transaction():
            conn.execute("select set_config('tickq.traceparent', %s, true)", (traceparent,))
            yield

    @contextmanager
    def continuing(self, carrier: Mapping[str, str] | None) -> Iterator[None]:
        """Inside the block, the trace a request's W3C headers name is the current one,
        unless a span is already current (the ADOT layer's own, say). A traceparent that
        is not valid (`valid_traceparent`) is ignored with its tracestate, as the W3C
        rules say: the block runs in no trace, and its spans start one of their own."""
        current = self._trace.get_current_span().get_span_context()
        if not carrier or current.is_valid or not valid_traceparent(carrier.get("traceparent")):
            yield
            return
        from opentelemetry import context

        token = context.attach(self._propagator.extract(dict(carrier)))
        try:
            yield
        finally:
            context.detach(token)

    def span(self, name: str, attributes: Mapping[str, Any]) -> AbstractContextManager[Any]:
        """An internal span of the current trace (a batch's claim or finish, a step)."""
        return self.tracer.start_as_current_span(name, attributes=dict(attributes))

    @contextmanager
    def job(self, job: Any, traceparent: str | None) -> Iterator[Callable[[str], None]]:
        """The consumer span of one run, parented by the enqueuer's context; yields the
        callback that records the run's outcome (on the span and in the metrics)."""
        parent = (
            self._propagator.extract({"traceparent": traceparent})
            if valid_traceparent(traceparent)
            else None
        )
        attributes = {
            "messaging.system": SYSTEM,
            "messaging.operation": "process",
            "messaging.operation.type": "process",
            "messaging.destination.name": job.type,
            "messaging.message.id": str(job.id),
            "tickq.queue": job.queue,
            "tickq.attempt": job.attempts,
        }
        started = time.monotonic()
        outcome = ["unknown"]
        with self.tracer.start_as_current_span(
            f"process {job.type}",
            context=parent,
            kind=self._trace.SpanKind.CONSUMER,
            attributes=attributes,
        ) as span:

            def ended(status: str) -> None:
                outcome[0] = status
                span.set_attribute("tickq.outcome", status)
                if status in ("retrying", "dead"):
                    span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))

            try:
                yield ended
            finally:
                labels = {"tickq.type": job.type, "tickq.outcome": outcome[0]}
                self.completed.add(1, labels)
                self.duration.record(time.monotonic() - started, labels)

    def record_depth(self, queue: str, type_: str, depth: float, oldest_seconds: float) -> None:
        labels = {"tickq.queue": queue, "tickq.type": type_}
        self.depth.set(depth, labels)
        self.oldest.set(oldest_seconds, labels)


_loaded: Telemetry | None = None
_decided: bool | None = None


def active() -> bool:
    """Whether OpenTelemetry is on for this process (decided once; `reset` decides again)."""
    global _decided
    if _decided is None:
        setting = (os.environ.get("TICKQ_OTEL") or "auto").strip().lower()
        if setting not in ("on", "off", "auto"):
            raise ConfigurationError(f"TICKQ_OTEL must be on, off or auto, got {setting!r}")
        _decided = setting == "on" or (setting == "auto" and _API in sys.modules)
    return _decided


def get() -> Telemetry:
    """The loaded API; only when `active()`."""
    global _loaded
    if _loaded is None:
        _loaded = Telemetry()
    return _loaded


def recording(conn: Any) -> AbstractContextManager[None]:
    """Telemetry.recording when on; a shared no-op otherwise."""
    return get().recording(conn) if active() else _NO_SPAN


def span(name: str, **attributes: Any) -> AbstractContextManager[Any]:
    """Telemetry.span when on; a shared no-op otherwise."""
    return get().span(name, attributes) if active() else _NO_SPAN


def reset() -> None:
    """Decide again at the next use (tests, and a process whose setting changed)."""
    global _loaded, _decided
    _loaded = None
    _decided = None
