"""Repeated local TickFunction invocations in one process, as a warm Lambda environment
would run them: `python -m tests.chaos.tick_function` until killed.

A failed invocation (the database restarting, say) is logged and followed by the next one,
as Lambda would; the soak kills this process at random like any other worker.
"""

from __future__ import annotations

import sys
import time
import uuid

from tickq.functions import db, tick

BUDGET_MS = 1_500  # under the chaos lease (2 s), as TickFunction requires


class Context:
    """The parts of a Lambda context the tick reads, on a real clock."""

    function_name = "tickq-tick"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:tickq-tick"
    memory_limit_in_mb = 512
    log_group_name = "/aws/lambda/tickq-tick"
    log_stream_name = "local"

    def __init__(self) -> None:
        self.aws_request_id = str(uuid.uuid4())
        self.deadline = time.monotonic() + BUDGET_MS / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def main() -> int:
    while True:
        try:
            report = tick.handler({}, Context())
        except Exception as exc:  # an invocation failed; the next one starts fresh
            print(f"invocation failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            db.discard()
            time.sleep(0.5)
            continue
        if not report.get("claimed"):
            time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
