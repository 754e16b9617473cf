"""Pages of jobs: the size a page may have, and the opaque cursor to the next one, which
every store encodes the same way (the newest first, by creation time and then id)."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from uuid import UUID

from .errors import InvalidJob
from .jobs import Job

MAX_PAGE = 500


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
