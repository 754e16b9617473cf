"""Handlers of tests/integration/test_runner_timeouts.py that run in a child process
(isolation="process"): defined at a module's top level, so the child imports them by name."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from queue_core import PermanentError


def sleep_then_write(job: Any) -> str:
    """Note the child's pid, sleep, then write the marker: a killed child never does."""
    Path(job.payload["pid_file"]).write_text(str(os.getpid()))
    time.sleep(job.payload["sleep"])
    Path(job.payload["marker"]).write_text("the handler ran past its timeout")
    return "late"


def double(job: Any) -> dict[str, Any]:
    return {"n": job.payload["n"] * 2, "attempt": job.attempt, "pid": os.getpid()}


def refuse(job: Any) -> None:
    if job.payload.get("permanent"):
        raise PermanentError("never")
    raise ValueError("boom")
