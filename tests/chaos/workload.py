"""What the soak enqueues: job kinds, drawn by weight, each a function from a random draw
to a JobSpec. Add a kind (step-structured jobs, a dependency graph, a group) by writing
its spec function and appending it to KINDS; its handler goes in chaos_tasks."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from queue_core.model import validation
from queue_core.model.jobs import JobSpec
from tests.chaos.limits import BACKOFF, HANG_TIMEOUT_SECONDS, MAX_ATTEMPTS

# Keys drawn from a small pool repeat often, so duplicates of live jobs (and reuses of
# keys whose job has finished) happen throughout the soak.
KEYS = 150


@dataclass(frozen=True)
class Kind:
    name: str
    weight: float
    spec: Callable[[random.Random, int], JobSpec]


def _chaos(
    n: int, *, key: str | None = None, delay: float | None = None, type_: str = "chaos"
) -> JobSpec:
    return validation.job_spec(
        type_,
        {"n": n},
        idempotency_key=key,
        delay=delay,
        max_attempts=MAX_ATTEMPTS,
        backoff_policy=BACKOFF,
        priority=n % 3,
    )


def plain(rng: random.Random, n: int) -> JobSpec:
    return _chaos(n)


def keyed(rng: random.Random, n: int) -> JobSpec:
    return _chaos(n, key=f"key-{rng.randrange(KEYS)}")


def delayed(rng: random.Random, n: int) -> JobSpec:
    """Not runnable for a while: a claim that ignores run_after takes it early."""
    return _chaos(n, delay=rng.uniform(0.5, 3.0))


def transactional(rng: random.Random, n: int) -> JobSpec:
    """Its handler writes a row in its transaction: the row commits exactly with success."""
    return _chaos(n, type_="chaos-tx")


def hanging(rng: random.Random, n: int) -> JobSpec:
    """Its handler hangs half the time, heartbeating: only its timeout frees it (the plain
    one abandoned in its thread, the async one cancelled)."""
    type_ = rng.choice(("chaos-hang", "chaos-hang-async"))
    return validation.job_spec(
        type_,
        {"n": n},
        max_attempts=MAX_ATTEMPTS,
        backoff_policy=BACKOFF,
        timeout=HANG_TIMEOUT_SECONDS,
    )


def mixed(rng: random.Random, n: int) -> JobSpec:
    """Only succeeds, after 1 ms to past its lease (chaos_tasks.chaos_mixed)."""
    return _chaos(n, type_="chaos-mixed")


KINDS: tuple[Kind, ...] = (
    Kind("plain", 0.38, plain),
    Kind("keyed", 0.38, keyed),
    Kind("hanging", 0.04, hanging),
    Kind("delayed", 0.10, delayed),
    Kind("transactional", 0.10, transactional),
    Kind("mixed", 0.10, mixed),
)


def draw(rng: random.Random, n: int) -> JobSpec:
    kind = rng.choices(KINDS, weights=[k.weight for k in KINDS])[0]
    return kind.spec(rng, n)
