"""The error of an attempt stopped at its timeout, written by the runner and read back by
every view of the job: a job's row keeps its last attempt's error, so the error says how the
handler was stopped, and the views show that as a field of its own (`timed_out`)."""

from __future__ import annotations

import re
from typing import Any

# How a handler is stopped at its timeout, by kind (queue_core/runner/timeouts.py): an async one's
# task is cancelled, a process-isolated one's child killed, a plain one's thread abandoned.
STOPPED_BY = ("cancelled", "killed", "abandoned")

# Only the runner writes this shape: a handler's own failures read "<ExceptionType>: ...".
_ERROR = re.compile(r"timed out after (\d+(?:\.\d+)?) s \((cancelled|killed|abandoned)\)")


def timed_out_error(seconds: float, how: str) -> str:
    """The error an attempt stopped at its timeout ends with, saying how it was stopped."""
    if how not in STOPPED_BY:
        raise ValueError(f"a handler is stopped {' or '.join(STOPPED_BY)}, not {how!r}")
    return f"timed out after {seconds:g} s ({how})"


def timed_out_view(error: str | None) -> dict[str, Any] | None:
    """`{"after_seconds": N, "stopped": how}` when `error` is a timed-out attempt's (as
    timed_out_error wrote it), else None."""
    if error is None or not error.startswith("timed out after "):
        return None
    found = _ERROR.fullmatch(error)
    if found is None:
        return None
    seconds = float(found.group(1))
    return {
        "after_seconds": int(seconds) if seconds.is_integer() else seconds,
        "stopped": found.group(2),
    }
