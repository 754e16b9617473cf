"""A job's payload on its way into storage and back: the one place a payload is encoded
(every enqueue path: a request, a batch, a map's children, a schedule's occurrence) and
decoded (a job built from its request or read from a row, which the handler, the views and
the console see). A payload kept elsewhere (an object store, encrypted at rest) is a change
to this module alone: `encode` would store the payload and return what the row keeps,
`decode` read it back."""

from __future__ import annotations

import json
from typing import Any

from queue_core.model.json_text import MAX_PAYLOAD_BYTES, json_object


def encode(payload: Any, max_bytes: int = MAX_PAYLOAD_BYTES) -> str:
    """The payload as the row stores it: the JSON text of an object (None is {}), checked."""
    return json_object({} if payload is None else payload, "payload", max_bytes)


def decode(stored: Any) -> Any:
    """The payload as the row keeps it, made a value again: the driver has parsed a jsonb
    column already; text is what `encode` returned."""
    if isinstance(stored, str | bytes):
        value: dict[str, Any] = json.loads(stored)
        return value
    return stored
