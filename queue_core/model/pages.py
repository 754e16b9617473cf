"""Pages of jobs: the size a page may have, and the opaque cursor to the next one, which
every store encodes the same way (the newest first, by creation time and then id).

A list of jobs (the API's GET /jobs, the operator console's) holds each job's small values
and leaves out its large ones, so that a page is bounded in bytes whatever the jobs hold: a
payload, result, progress or error history is shown when it is small (at most
LIST_VALUE_BYTES as stored, uncompressed, and as JSON text), else it is null and named in
the job's `truncated` with the bytes it takes as stored; the error is cut to its first
LIST_ERROR_CHARS characters (and named there too, with its bytes). PostgreSQL decides this
from the values' headers (tickq.list_left_out), so a page never reads a large value. On
top, a page stops before the job that would take its JSON past MAX_PAGE_BYTES, and its
cursor continues from the last job it holds. The job's own view has everything.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from queue_core.errors import InvalidJob
from queue_core.model.jobs import Job

MAX_PAGE = 500
# tickq.list_left_out's bound (queue_core/schema/functions/list_left_out.sql).
LIST_VALUE_BYTES = 1024
# The characters of a job's error a list shows (jobs_search_listed, tickq.operator_jobs).
LIST_ERROR_CHARS = 200
# The JSON of a list page's jobs: far under a Lambda response's 6 MB and its memory. A job
# as a list shows it takes at most some 20 KB of JSON (four values of LIST_VALUE_BYTES, each
# up to three times longer escaped, an error of LIST_ERROR_CHARS characters of up to 12 bytes
# each), so a page holds at least about 50 jobs, and usually all it was asked for.
MAX_PAGE_BYTES = 1024 * 1024
# The JSON values of a job that lists show only when small.
LISTED_VALUES = ("payload", "result", "progress", "errors")


def check_page_limit(limit: object) -> None:
    """A page of jobs holds 1 to MAX_PAGE of them."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidJob("limit", f"must be an integer between 1 and {MAX_PAGE}")


def encode_cursor(job: Job) -> str:
    return cursor_at(job.created_at, job.id)


def cursor_at(created_at: datetime, id_: UUID) -> str:
    """The cursor to the jobs after (older than) the one created at `created_at` with `id_`."""
    raw = f"{created_at.isoformat()}|{id_}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, UUID]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, id_ = base64.urlsafe_b64decode(padded.encode("ascii")).decode().split("|")
        when = datetime.fromisoformat(created)
        if when.tzinfo is None:
            raise ValueError("naive time")
        return when, UUID(id_)
    except (ValueError, UnicodeError, binascii.Error):
        raise InvalidJob("cursor", "is not a cursor this API returned") from None


def json_bytes(value: Any) -> int:
    """The bytes of `value` in a response: JSON as the API writes it (ASCII, non-ASCII
    characters escaped), anything else as its text."""
    return len(json.dumps(value, default=str))


def listed(job: Job) -> dict[str, Any]:
    """A job as a list shows it, for a store that has the job at hand (the in-memory one):
    PostgreSQL's rule (jobs_search_listed), sizes measured as compact UTF-8 JSON text."""
    entry = job.to_dict()
    truncated: dict[str, int] = {}
    for name in LISTED_VALUES:
        value = entry[name]
        if value is None:
            continue
        size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
        if size > LIST_VALUE_BYTES:
            entry[name] = None
            truncated[name] = size
    error = entry["error"]
    if error is not None and len(error) > LIST_ERROR_CHARS:
        entry["error"] = error[:LIST_ERROR_CHARS]
        truncated["error"] = len(error.encode())
    entry["truncated"] = truncated
    return entry


def fit_page(
    entries: Sequence[dict[str, Any]], limit: int, *, max_bytes: int = MAX_PAGE_BYTES
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of list entries (JSON-ready jobs, newest first, with "id" and "created_at"),
    from the up to `limit` + 1 a statement read: the first ones whose JSON fits in
    `max_bytes` (one at least, up to `limit`), and the cursor to those after the last one
    kept, None when there are none."""
    kept: list[dict[str, Any]] = []
    size = 2  # the list's brackets
    for entry in entries[:limit]:
        size += json_bytes(entry) + (2 if kept else 0)  # ", " between entries
        if kept and size > max_bytes:
            break
        kept.append(entry)
    if len(kept) == len(entries):
        return kept, None
    last = kept[-1]
    return kept, cursor_at(_time(last["created_at"]), _uuid(last["id"]))


def _time(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def _uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(value)
