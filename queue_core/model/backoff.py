"""Retry delays: a pure function of the attempt number, applied by the engine."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """`min(base * factor^(attempt-1), max)`, shortened by up to `jitter` (a fraction) at random."""

    base: float = 1.0
    factor: float = 2.0
    max: float = 300.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if not (0 < self.base <= 86_400):
            raise ValueError(f"backoff base must be in (0, 86400] seconds, got {self.base!r}")
        if not (1 <= self.factor <= 100):
            raise ValueError(f"backoff factor must be in [1, 100], got {self.factor!r}")
        if not (self.base <= self.max <= 7 * 86_400):
            raise ValueError(f"backoff max must be in [base, 7 days], got {self.max!r}")
        if not (0 <= self.jitter <= 1):
            raise ValueError(f"backoff jitter must be a fraction in [0, 1], got {self.jitter!r}")

    def delay(self, attempt: int, rand: float = 0.0) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based); `rand` is in [0, 1)."""
        exponent = max(0, attempt - 1)
        # Cap the exponent before powering so huge attempt counts cannot overflow a float.
        raw = self.max if exponent > 64 else min(self.base * self.factor**exponent, self.max)
        return raw * (1.0 - self.jitter * rand)


DEFAULT_BACKOFF = Backoff()
