"""The OpenTelemetry SDK's in-memory exporter and metric reader, installed once per test
process (OpenTelemetry lets a process set its providers only once), for the tests of
queue_core/telemetry.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from queue_core import telemetry

EXPORTER = InMemorySpanExporter()
READER = InMemoryMetricReader()
_installed: list[bool] = []


def install_sdk() -> None:
    if not _installed:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))
        _installed.append(True)


def otel_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """TICKQ_OTEL=on for one test, the exporter emptied; the decision undone after."""
    install_sdk()
    monkeypatch.setenv("TICKQ_OTEL", "on")
    telemetry.reset()
    EXPORTER.clear()
    yield EXPORTER
    telemetry.reset()


def spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]
