"""JSON values as tickq stores them: encoded once, and the text both checked (size, nesting,
NUL characters, valid UTF-8) and sent to the database, for payloads, results, progress,
step results, signal payloads and event details alike."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from typing import Any

from queue_core.errors import InvalidJob

MAX_PAYLOAD_BYTES = 256 * 1024
# Arrays and objects nested in one JSON value, at most. Python's json module takes a level
# of the interpreter's stack for each, and a worker reading a value nested about 1000 deep
# fails with RecursionError; every table holds the same bound (queue_core/bounds.py).
MAX_JSON_DEPTH = 64
# A NUL escape preceded by an even number of backslashes: PostgreSQL's jsonb rejects it.
_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def json_object(value: Any, field: str, max_bytes: int = MAX_PAYLOAD_BYTES) -> str:
    """Serialize a JSON object once; the text is both size-checked and sent to the database."""
    if not isinstance(value, Mapping):
        raise InvalidJob(field, f"must be a JSON object, got {type(value).__name__}")
    if type(value) is dict and not value and max_bytes >= 2:
        return "{}"  # the most common payload, without a trip through the encoder
    return json_value(value, field, max_bytes)


def json_value(value: Any, field: str, max_bytes: int = MAX_PAYLOAD_BYTES) -> str:
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except RecursionError:
        raise InvalidJob(
            field, f"is nested too deeply (more than {MAX_JSON_DEPTH} arrays and objects)"
        ) from None
    except (TypeError, ValueError) as exc:
        raise InvalidJob(field, f"is not JSON-serializable: {exc}") from None
    size = len(utf8(encoded, field))
    if size > max_bytes:
        raise InvalidJob(field, f"is {size} bytes, over the limit of {max_bytes}")
    # Every array and object opens with a bracket: fewer brackets than the bound (most
    # values) cannot nest past it, and skip the walk.
    if encoded.count("[") + encoded.count("{") > MAX_JSON_DEPTH and _too_deep(value):
        raise InvalidJob(
            field, f"is nested too deeply (more than {MAX_JSON_DEPTH} arrays and objects)"
        )
    if "\\u0000" in encoded and _JSON_NUL.search(encoded):
        raise InvalidJob(field, "must not contain NUL characters (PostgreSQL cannot store them)")
    return encoded


def _too_deep(value: Any) -> bool:
    """Whether more than MAX_JSON_DEPTH arrays and objects nest in `value` (a value json.dumps
    took), walked without recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Collection[Any] = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def utf8(value: str, field: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJob(field, "is not valid UTF-8 (lone surrogate characters)") from None
