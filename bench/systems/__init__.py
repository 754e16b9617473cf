"""One module per queue under test, each with the same functions (see `System`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class System:
    """What the harness needs from a queue: install, enqueue, and drain/latency workers.

    `prepare_drain` and `latency_worker` run inside worker processes, so they are plain
    module-level functions (picklable by name).
    """

    name: str
    install: Callable[[str], None]
    bulk_enqueue: Callable[[str, int], float]
    single_enqueue: Callable[[str, int], float]
    prepare_drain: Callable[..., Callable[[], int]] | None
    drain_variants: tuple[str, ...]
    latency_worker: Callable[..., None] | None
    latency_producer: Callable[[str, int, float], dict[str, float]] | None
    max_drain_jobs: int | None = None  # a slow peer drains a smaller backlog


def all_systems() -> list[System]:
    from . import pgqueuer_side, procrastinate_side, raw_side, slim_side, tickq_side

    return [
        tickq_side.SYSTEM,
        raw_side.SYSTEM,
        slim_side.SYSTEM,
        pgqueuer_side.SYSTEM,
        procrastinate_side.SYSTEM,
    ]


def noop(*_: Any, **__: Any) -> None:
    """The handler every system runs: no work, so the queue itself is measured."""
