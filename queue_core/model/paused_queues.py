"""Which queues a claim may take from, given the paused set (see queue_core/policies/pauses.py).

Each store re-reads the paused set at most every PAUSES_TTL_SECONDS with one small
statement, so every worker sees a pause within seconds, and a workload with no paused
queue pays that probe and nothing else: its claim statements are unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

PAUSES_TTL_SECONDS = 5.0


class PausedQueues:
    """A worker's view of the paused set, read again once it is PAUSES_TTL_SECONDS old."""

    def __init__(self, ttl_seconds: float = PAUSES_TTL_SECONDS) -> None:
        self.ttl_seconds = ttl_seconds
        self._known: tuple[float, frozenset[str]] | None = None

    def current(self, read: Callable[[], Sequence[str]]) -> frozenset[str]:
        checked = time.monotonic()
        if self._known is None or checked - self._known[0] >= self.ttl_seconds:
            self._known = (checked, frozenset(read()))
        return self._known[1]

    def forget(self) -> None:
        """Read the paused set again at the next claim (after this process changed it)."""
        self._known = None


def claimable(queues: Sequence[str], limit: int, paused: frozenset[str]) -> tuple[list[str], int]:
    """The queues a claim may take from and how many jobs it may take: with every asked queue
    paused, none (the statement still persists outcomes, on the queues as given)."""
    if not paused:
        return list(queues), limit
    left = [q for q in queues if q not in paused]
    return (left, limit) if left else (list(queues), 0)
