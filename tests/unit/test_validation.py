"""validation.job_spec: every enqueue request is checked before anything is written."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import UUID

import pytest

from queue_core.errors import InvalidJob, UnknownJobType
from queue_core.model.backoff import Backoff
from queue_core.model.validation import MAX_NAME, job_spec


def refused(field: str, **request: Any) -> InvalidJob:
    """Validate a request expected to fail on `field`; return the error for more checks."""
    request.setdefault("type", "embed")
    with pytest.raises(InvalidJob) as raised:
        job_spec(**request)
    assert raised.value.field == field, raised.value
    return raised.value


def test_a_minimal_request_gets_the_defaults() -> None:
    spec = job_spec("embed")

    assert spec.payload_json == "{}"
    assert spec.queue == "default"
    assert spec.max_attempts == 3
    assert spec.priority == 0
    assert spec.run_after is None and spec.delay == 0
    assert spec.backoff == Backoff()


def test_a_full_request_is_kept_as_given() -> None:
    when = datetime(2026, 5, 1, 9, tzinfo=timezone(timedelta(hours=9)))

    spec = job_spec(
        "embed",
        {"doc": "日本語", "n": [1, 2.5, None, True]},
        queue="high",
        user_id="0190c0de-0000-7000-8000-000000000001",
        idempotency_key="doc-1",
        max_attempts=5,
        priority=-7,
        run_after=when,
        lease_seconds=60,
        backoff_policy={"base": 2, "factor": 3, "max": 60, "jitter": 0.1},
    )

    assert json.loads(spec.payload_json) == {"doc": "日本語", "n": [1, 2.5, None, True]}
    assert spec.user_id == UUID("0190c0de-0000-7000-8000-000000000001")
    assert (spec.queue, spec.idempotency_key, spec.max_attempts) == ("high", "doc-1", 5)
    assert (spec.priority, spec.run_after, spec.lease_seconds) == (-7, when, 60)
    assert spec.backoff == Backoff(2, 3, 60, 0.1)


# Type


def test_an_unknown_type_is_refused_when_the_known_types_are_given() -> None:
    with pytest.raises(UnknownJobType) as raised:
        job_spec("embd", known_types={"embed", "transcribe"})

    assert raised.value.type == "embd"
    assert raised.value.known == ["embed", "transcribe"]
    assert "embed, transcribe" in str(raised.value)


@pytest.mark.parametrize("type_", ["", None, 7, "has space", "embed'; drop table x; --"])
def test_a_malformed_type_is_refused(type_: Any) -> None:
    refused("type", type=type_)


# Payload


@pytest.mark.parametrize("payload", [[1, 2], "text", 3, True])
def test_a_payload_that_is_not_an_object_is_refused(payload: Any) -> None:
    error = refused("payload", payload=payload)

    assert "JSON object" in error.reason


def test_a_payload_over_the_size_limit_is_refused_with_its_size() -> None:
    error = refused("payload", payload={"blob": "x" * 2000}, max_payload_bytes=1000)

    assert "over the limit of 1000" in error.reason


def test_the_size_limit_counts_utf8_bytes_not_characters() -> None:
    payload = {"t": "あ" * 300}  # 900 bytes of text in 300 characters

    refused("payload", payload=payload, max_payload_bytes=600)
    assert job_spec("embed", payload, max_payload_bytes=1000)


def test_the_default_payload_limit_is_256_kib() -> None:
    refused("payload", payload={"blob": "x" * (256 * 1024)})


@pytest.mark.parametrize(
    "payload",
    [{"name": "a\x00b"}, {"nested": [{"deep": "\x00"}]}, {"ke\x00y": 1}],
)
def test_nul_characters_in_payload_strings_are_refused(payload: dict[str, Any]) -> None:
    error = refused("payload", payload=payload)

    assert "NUL" in error.reason


def test_an_escaped_backslash_before_u0000_is_ordinary_text() -> None:
    spec = job_spec("embed", {"path": "C:\\u0000"})

    assert json.loads(spec.payload_json) == {"path": "C:\\u0000"}


@pytest.mark.parametrize("payload", [{"s": "\ud800"}, {"\udfff": 1}])
def test_lone_surrogates_in_the_payload_are_refused(payload: dict[str, Any]) -> None:
    error = refused("payload", payload=payload)

    assert "UTF-8" in error.reason


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_in_the_payload_are_refused(number: float) -> None:
    refused("payload", payload={"x": number})


@pytest.mark.parametrize("value", [{1, 2}, object(), b"bytes"])
def test_values_json_cannot_represent_are_refused(value: Any) -> None:
    error = refused("payload", payload={"x": value})

    assert "JSON-serializable" in error.reason


def test_a_payload_nested_too_deeply_is_refused() -> None:
    payload: dict[str, Any] = {}
    for _ in range(100_000):
        payload = {"x": payload}

    error = refused("payload", payload=payload)

    assert "nested too deeply" in error.reason


# Numbers


@pytest.mark.parametrize("value", [0, -1, 1001, 10**12])
def test_max_attempts_outside_1_to_1000_is_refused(value: int) -> None:
    refused("max_attempts", max_attempts=value)


@pytest.mark.parametrize("value", [True, False, 3.0, "3"])
def test_max_attempts_must_be_a_real_integer(value: Any) -> None:
    error = refused("max_attempts", max_attempts=value)

    assert "integer" in error.reason


@pytest.mark.parametrize("value", [True, 2**31, -(2**31), 1.5])
def test_priority_must_be_a_32_bit_integer(value: Any) -> None:
    refused("priority", priority=value)


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), 400 * 86_400, True, "5"])
def test_delay_must_be_a_finite_number_of_seconds_within_a_year(value: Any) -> None:
    refused("delay", delay=value)


@pytest.mark.parametrize("value", [0, 12 * 3600 + 1, 1.5])
def test_lease_seconds_must_be_a_positive_integer_up_to_twelve_hours(value: Any) -> None:
    refused("lease_seconds", lease_seconds=value)


# Time


def test_a_naive_run_after_is_refused() -> None:
    error = refused("run_after", run_after=datetime(2026, 1, 1, 9))

    assert "timezone-aware" in error.reason


def test_run_after_that_is_not_a_datetime_is_refused() -> None:
    refused("run_after", run_after="2026-01-01T09:00:00+00:00")


def test_run_after_and_delay_together_are_refused() -> None:
    error = refused("run_after", run_after=datetime(2026, 1, 1, tzinfo=UTC), delay=5)

    assert "not both" in error.reason


# Names and keys


@pytest.mark.parametrize(
    "queue",
    ["", " high", "high low", "-high", "_x", "x" * (MAX_NAME + 1), "q;drop", "ü", 5, b"q"],
)
def test_bad_queue_names_are_refused(queue: Any) -> None:
    refused("queue", queue=queue)


@pytest.mark.parametrize("queue", ["high", "a", "tenant-1/emails.v2:urgent", "x" * MAX_NAME])
def test_good_queue_names_are_accepted(queue: str) -> None:
    assert job_spec("embed", queue=queue).queue == queue


@pytest.mark.parametrize("key", ["", "k" * 256, "a\x00b", "\ud800", 42])
def test_bad_idempotency_keys_are_refused(key: Any) -> None:
    refused("idempotency_key", idempotency_key=key)


@pytest.mark.parametrize("user_id", ["not-a-uuid", 42, "", "' or 1=1 --"])
def test_a_user_id_that_is_not_a_uuid_is_refused(user_id: Any) -> None:
    refused("user_id", user_id=user_id)


def test_sql_looking_strings_are_kept_as_plain_data() -> None:
    key = "x'); delete from tickq.jobs; --"
    payload = {"q": "'; drop table tickq.jobs; --", "$$": "$1 %(now)s {columns}"}

    spec = job_spec("embed", payload, idempotency_key=key)

    assert spec.idempotency_key == key
    assert json.loads(spec.payload_json) == payload


# Backoff policy


@pytest.mark.parametrize(
    "policy",
    [
        {"base": 0},
        {"factor": 0.5},
        {"base": 10, "max": 5},
        {"jitter": 2},
        {"base": float("nan")},
        {"base": "1"},
        {"speed": 1},
        [1, 2],
    ],
)
def test_a_bad_backoff_policy_is_refused(policy: Any) -> None:
    with pytest.raises(InvalidJob) as raised:
        job_spec("embed", backoff_policy=policy)

    assert raised.value.field.startswith("backoff")
