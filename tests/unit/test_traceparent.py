"""W3C traceparent validation (queue_core/telemetry.py) on every Python path that takes one:
generated valid values are continued, and each way of breaking one is not."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from queue_core import InvalidJob, telemetry
from queue_core.telemetry import check_traceparent, valid_traceparent
from tests.otel_sdk import otel_on
from tickq.functions.enqueue import event_traceparent
from tickq.functions.observability import http_trace_headers

TRACE, PARENT = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
GOOD = f"00-{TRACE}-{PARENT}-01"

HEX = "0123456789abcdef"


def hex_digits(n: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=HEX, min_size=n, max_size=n)


VERSIONS = hex_digits(2).filter(lambda v: v != "ff")
TRACE_IDS = hex_digits(32).filter(lambda t: t != "0" * 32)
PARENT_IDS = hex_digits(16).filter(lambda p: p != "0" * 16)
# A later version's further fields: a '-', then printable ASCII.
TAILS = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60)


@st.composite
def traceparents(draw: st.DrawFn) -> str:
    version = draw(VERSIONS)
    value = f"{version}-{draw(TRACE_IDS)}-{draw(PARENT_IDS)}-{draw(hex_digits(2))}"
    if version != "00" and draw(st.booleans()):
        value += "-" + draw(TAILS)
    return value


def continued(value: str) -> trace.SpanContext:
    """The span context OpenTelemetry's own propagator reads from `value`."""
    context = TraceContextTextMapPropagator().extract({"traceparent": value})
    return trace.get_current_span(context).get_span_context()


@settings(deadline=None)  # a shared, noisy machine: no time limit per example
@given(traceparents())
def test_a_valid_traceparent_is_taken_and_continued_with_its_ids(value: str) -> None:
    assert valid_traceparent(value)
    assert check_traceparent(value) == value
    found = continued(value)
    assert found.is_valid
    assert (f"{found.trace_id:032x}", f"{found.span_id:016x}") == (value[3:35], value[36:52])
    # A header's spaces and tabs around the value are not part of it (a later version's
    # fields may end in a space, which the header then loses).
    assert http_trace_headers({"headers": {"traceparent": f" \t{value}\t "}}) == {
        "traceparent": value.strip(" \t")
    }
    assert event_traceparent({"traceparent": value}) == {"traceparent": value}


def broken(value: str, how: str, data: st.DataObject) -> str:
    """`value` broken one way."""
    if how == "version ff":
        return "ff" + value[2:]
    if how == "zero trace id":
        return f"{value[:3]}{'0' * 32}{value[35:]}"
    if how == "zero parent id":
        return f"{value[:36]}{'0' * 16}{value[52:]}"
    if how == "short":
        return value[: data.draw(st.integers(0, 54))]
    if how == "a dash replaced":
        at = data.draw(st.sampled_from([2, 35, 52]))
        char = data.draw(st.characters().filter(lambda c: c != "-"))
        return value[:at] + char + value[at + 1 :]
    if how == "a digit not lower-case hex":
        at = data.draw(st.sampled_from([i for i in range(55) if i not in (2, 35, 52)]))
        char = data.draw(st.characters().filter(lambda c: c not in HEX))
        return value[:at] + char + value[at + 1 :]
    if how == "version 00 with more":
        return "00" + value[2:55] + data.draw(st.text(min_size=1))
    if how == "more without a dash":
        return value[:55] + data.draw(st.text(min_size=1).filter(lambda t: t[0] != "-"))
    if how == "a control character after":
        return "01" + value[2:55] + "-" + data.draw(st.sampled_from(["\n", "\x00", "\x1b", "\x7f"]))
    if how == "spaces around":
        return data.draw(st.sampled_from([" ", "\t", "\n"])) + value
    raise AssertionError(how)


HOW = [
    "version ff",
    "zero trace id",
    "zero parent id",
    "short",
    "a dash replaced",
    "a digit not lower-case hex",
    "version 00 with more",
    "more without a dash",
    "a control character after",
    "spaces around",
]


@pytest.mark.parametrize("how", HOW)
@settings(deadline=None)  # a shared, noisy machine: no time limit per example
@given(value=traceparents(), data=st.data())
def test_a_broken_traceparent_is_refused_as_an_argument_and_ignored_as_a_header(
    how: str, value: str, data: st.DataObject
) -> None:
    bad = broken(value, how, data)
    assume(bad != value)
    assert not valid_traceparent(bad)
    with pytest.raises(InvalidJob, match="must be a W3C traceparent") as refused:
        check_traceparent(bad)
    assert refused.value.field == "traceparent"
    assert event_traceparent({"traceparent": bad}) is None
    if not valid_traceparent(bad.strip(" \t")):  # a header's spaces are not part of it
        headers = {"traceparent": bad, "tracestate": "vendor=1"}
        assert http_trace_headers({"headers": headers}) is None


@pytest.mark.parametrize("value", [None, 7, b"00-x", ["00"], GOOD.upper()])
def test_what_is_not_a_traceparent_string_is_refused_with_its_type(value: object) -> None:
    assert not valid_traceparent(value)
    with pytest.raises(InvalidJob, match="traceparent"):
        check_traceparent(value)


def test_repeated_headers_joined_by_a_comma_are_ignored() -> None:
    assert http_trace_headers({"headers": {"traceparent": f"{GOOD},{GOOD}"}}) is None


@pytest.fixture
def otel(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    yield from otel_on(monkeypatch)


def test_an_enqueue_under_a_span_context_with_a_zero_id_records_none(
    otel: InMemorySpanExporter,
) -> None:
    """A span whose trace id is zero is invalid, but OpenTelemetry's propagator still
    writes it out; the enqueue must not record that as the job's trace."""
    zero_trace = trace.SpanContext(trace_id=0, span_id=0x1234, is_remote=True)
    with trace.use_span(trace.NonRecordingSpan(zero_trace)):
        assert telemetry.get().traceparent() is None
    with trace.get_tracer("test").start_as_current_span("caller") as span:
        context = span.get_span_context()
        recorded = telemetry.get().traceparent()
    flags = int(context.trace_flags)
    assert recorded == f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"


@pytest.mark.parametrize(
    "carrier",
    [
        {"traceparent": f"{GOOD}\n"},
        {"traceparent": f" {GOOD}"},
        {"traceparent": f"01-{TRACE}-{PARENT}-01-\x00"},
        {"traceparent": GOOD.replace("00-", "ff-", 1), "tracestate": "vendor=1"},
    ],
)
def test_a_carrier_that_is_not_valid_continues_no_trace(
    otel: InMemorySpanExporter, carrier: dict[str, str]
) -> None:
    with telemetry.get().continuing(carrier):
        assert not trace.get_current_span().get_span_context().is_valid
        assert telemetry.get().traceparent() is None


def test_a_later_version_is_continued_as_version_00(otel: InMemorySpanExporter) -> None:
    with telemetry.get().continuing({"traceparent": f"cc-{TRACE}-{PARENT}-01-future"}):
        assert telemetry.get().traceparent() == GOOD
