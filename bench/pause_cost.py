"""Claim throughput without the paused-queue probe, with it and no queue paused, and with
another queue paused.

Every store reads the paused set at most every PAUSES_TTL_SECONDS and leaves paused queues
out of its claim; this measures what that costs a workload that pauses nothing, against
the same claim with the probe taken out (the engine before pausing existed). Rounds
alternate between the configurations in one run on one server, so the ratios are not
skewed by a noisy machine drifting; each round drains the same backlog with the same number
of concurrent claimers (claim a batch, acknowledge it, repeat).

    .venv/bin/python -m bench.pause_cost [--jobs 4000] [--claimers 4] [--batch 10] [--rounds 3]

Uses TICKQ_DATABASE_URL (a superuser able to create databases) or a throwaway local server.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from queue_core import PostgresStore
from queue_core.migrate import migrate
from queue_core.model import transitions
from queue_core.model.paused_queues import PausedQueues
from queue_core.model.validation import job_spec
from queue_core.policies.pauses import QueuePauses

from .server import env_or_local_server, fresh_database


class _NoProbe(PausedQueues):
    """The claim as it was before pausing: no paused set is ever read."""

    def current(self, read: Callable[[], Sequence[str]]) -> frozenset[str]:
        return frozenset()


def _drain(url: str, claimers: int, batch: int, probe: bool) -> tuple[int, float]:
    """Claim and acknowledge until the backlog is gone; returns (jobs, seconds)."""
    counts = [0] * claimers
    start = threading.Barrier(claimers + 1)

    def claim_loop(slot: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            store = PostgresStore(conn)
            if not probe:
                store.paused = _NoProbe()
            store.limits_configured()  # the one-off lookups are not part of the measurement
            start.wait()
            while jobs := store.claim(limit=batch):
                store.finish([transitions.succeeded(job, None) for job in jobs])
                counts[slot] += len(jobs)

    threads = [threading.Thread(target=claim_loop, args=(i,)) for i in range(claimers)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return sum(counts), time.perf_counter() - began


def _round(url: str, jobs: int, claimers: int, batch: int, config: str) -> float:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("truncate tickq.jobs, tickq.queue_pauses cascade")
        if config == "other_queue_paused":
            QueuePauses(conn).pause("bulk", by="bench")
        PostgresStore(conn).enqueue_many([job_spec("work", {"i": i}) for i in range(jobs)])
        conn.execute("vacuum analyze tickq.jobs")
    done, seconds = _drain(url, claimers, batch, probe=config != "without_probe")
    assert done == jobs, (done, jobs)
    return done / seconds


CONFIGS = ("without_probe", "no_queue_paused", "other_queue_paused")


def measure(url: str, *, jobs: int, claimers: int, batch: int, rounds: int) -> dict[str, Any]:
    rates: dict[str, list[float]] = {config: [] for config in CONFIGS}
    _round(url, min(jobs, 500), claimers, batch, "without_probe")  # warm caches and plans
    for _ in range(rounds):
        for config in CONFIGS:
            rates[config].append(_round(url, jobs, claimers, batch, config))
    base = statistics.median(rates["without_probe"])
    return {
        "jobs": jobs,
        "claimers": claimers,
        "batch": batch,
        "rounds": rounds,
        **{f"{config}_jobs_per_s": [round(x) for x in rates[config]] for config in CONFIGS},
        "no_queue_paused_ratio": round(statistics.median(rates["no_queue_paused"]) / base, 3),
        "other_queue_paused_ratio": round(statistics.median(rates["other_queue_paused"]) / base, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--claimers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with env_or_local_server() as admin, fresh_database(admin, "pauses") as url:
        with psycopg.connect(url) as conn:
            migrate(conn)
        result = measure(
            url, jobs=args.jobs, claimers=args.claimers, batch=args.batch, rounds=args.rounds
        )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
