"""Pagination cursors: opaque, round-trip exactly, and refuse anything they did not make."""

from __future__ import annotations

import base64

import pytest

from queue_core.errors import InvalidJob
from queue_core.model.pages import decode_cursor, encode_cursor

from .factory import queued_job


def test_a_cursor_decodes_to_the_created_at_and_id_it_was_made_from() -> None:
    job = queued_job()

    created_at, job_id = decode_cursor(encode_cursor(job))

    assert (created_at, job_id) == (job.created_at, job.id)


def test_a_cursor_is_url_safe_without_padding() -> None:
    cursor = encode_cursor(queued_job())

    assert "=" not in cursor and "+" not in cursor and "/" not in cursor


def _raw(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "not a cursor!",
        "%%%%",
        _raw("no separator"),
        _raw("2026-01-01T00:00:00+00:00|not-a-uuid"),
        _raw("2026-01-01T00:00:00|0190c0de-0000-7000-8000-000000000000"),
        _raw("yesterday|0190c0de-0000-7000-8000-000000000000"),
        _raw("a|b|c"),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
def test_a_cursor_the_api_did_not_return_is_refused(cursor: str) -> None:
    with pytest.raises(InvalidJob) as raised:
        decode_cursor(cursor)

    assert raised.value.field == "cursor"
