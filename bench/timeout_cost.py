"""What a handler's timeout and isolation="process" cost per job: no-op jobs drained by a
Runner on the in-memory store (no database: only the handler's overhead is measured), as a
plain call, a plain call with a timeout (a thread of its own) and a call in a child process.

    .venv/bin/python -m bench.timeout_cost --jobs 300 --rounds 3
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from typing import Any

from queue_core import Registry, Runner
from queue_core.store.memory import MemoryStore

CASES = {
    "plain call": {},
    "plain call, timeout=60 (own thread)": {"timeout": 60},
    'isolation="process", timeout=60': {"timeout": 60, "isolation": "process"},
}


def noop(job: Any) -> None:
    """The handler: nothing, so the figure is the runner's overhead alone."""


def drain(options: dict[str, Any], jobs: int, concurrency: int) -> float:
    """Seconds to run `jobs` no-op jobs of one case."""
    registry = Registry()
    # By its module's name, so a child process finds it even when this runs as __main__.
    registry.task("noop", **options)(importlib.import_module("bench.timeout_cost").noop)
    store = MemoryStore()
    for _ in range(jobs):
        store.enqueue(registry.spec("noop"))
    started = time.perf_counter()
    with Runner(store, registry, batch_size=10, concurrency=concurrency) as runner:
        report = runner.tick()
    elapsed = time.perf_counter() - started
    assert report.succeeded == jobs, report
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()
    drain(CASES['isolation="process", timeout=60'], 10, 1)  # starts the fork server once
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.rounds):  # the cases take turns, round by round
        for name, options in CASES.items():
            times[name].append(drain(options, args.jobs, args.concurrency))
    base = statistics.median(times["plain call"]) / args.jobs * 1000
    print(f"| case (concurrency {args.concurrency}) | ms per job | added ms per job |")
    print("|---|---|---|")
    for name, seconds in times.items():
        ms = statistics.median(seconds) / args.jobs * 1000
        print(f"| {name} | {ms:.3f} | {ms - base:.3f} |")


if __name__ == "__main__":
    main()
