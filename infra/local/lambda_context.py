"""Lambda's context object for handlers run outside Lambda: `tickq serve`, `tickq invoke`
and the handler tests all pass this one."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

LOCAL_ACCOUNT = "123456789012"


class LocalContext:
    """The parts of the context that handlers and Powertools read, with a deadline
    `timeout_seconds` after creation on `clock` (a test passes a clock that stands still,
    and spends time by hand)."""

    def __init__(
        self,
        function_name: str = "ApiFunction",
        *,
        timeout_seconds: float = 30.0,
        memory_limit_in_mb: int = 512,
        region: str = "us-east-1",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = (
            f"arn:aws:lambda:{region}:{LOCAL_ACCOUNT}:function:{function_name}"
        )
        self.memory_limit_in_mb = memory_limit_in_mb
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = f"local/{self.aws_request_id}"
        self.identity = None
        self.client_context = None
        self._clock = clock
        self._deadline = clock() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - self._clock()) * 1000))

    def spend(self, ms: int) -> None:
        """Bring the deadline `ms` closer, as if the handler had run that long."""
        self._deadline -= ms / 1000
