"""Claim throughput with no limits vs a concurrency cap configured on another type.

With any type limit present, workers switch from the plain claim of `jobs_finish_and_claim` to
`tickq.claim_limited`; this measures what that costs a type that is not limited itself.
Rounds alternate between the two configurations in one run on one server, so the ratio is
not skewed by a noisy machine drifting; each round drains the same backlog with the same
number of concurrent claimers (claim a batch, acknowledge it, repeat).

    .venv/bin/python -m bench.limits_cost [--jobs 4000] [--claimers 4] [--batch 10] [--rounds 3]

Uses TICKQ_DATABASE_URL (a superuser able to create databases) or a throwaway local server.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from typing import Any

import psycopg

from queue_core import PostgresStore
from queue_core.migrate import migrate
from queue_core.model import transitions
from queue_core.model.validation import job_spec
from queue_core.policies.limits import Limits, type_limit

from .server import env_or_local_server, fresh_database


def _drain(url: str, claimers: int, batch: int) -> tuple[int, float]:
    """Claim and acknowledge until the backlog is gone; returns (jobs, seconds)."""
    counts = [0] * claimers
    start = threading.Barrier(claimers + 1)

    def claim_loop(slot: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            store = PostgresStore(conn)
            store.limits_configured()  # the one-off lookup is not part of the measurement
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


def _round(url: str, jobs: int, claimers: int, batch: int, capped: bool) -> float:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("truncate tickq.jobs, tickq.type_limits cascade")
        if capped:
            Limits(conn).set_type(type_limit("embed", max_running=5))
        PostgresStore(conn).enqueue_many([job_spec("work", {"i": i}) for i in range(jobs)])
        conn.execute("vacuum analyze tickq.jobs")
    done, seconds = _drain(url, claimers, batch)
    assert done == jobs, (done, jobs)
    return done / seconds


def measure(url: str, *, jobs: int, claimers: int, batch: int, rounds: int) -> dict[str, Any]:
    plain: list[float] = []
    limited: list[float] = []
    _round(url, min(jobs, 500), claimers, batch, capped=False)  # warm caches and plans
    for _ in range(rounds):
        plain.append(_round(url, jobs, claimers, batch, capped=False))
        limited.append(_round(url, jobs, claimers, batch, capped=True))
    return {
        "jobs": jobs,
        "claimers": claimers,
        "batch": batch,
        "rounds": rounds,
        "no_limits_jobs_per_s": [round(x) for x in plain],
        "cap_on_other_type_jobs_per_s": [round(x) for x in limited],
        "ratio_median": round(statistics.median(limited) / statistics.median(plain), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--claimers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with env_or_local_server() as admin, fresh_database(admin, "limits") as url:
        with psycopg.connect(url) as conn:
            migrate(conn)
        result = measure(
            url, jobs=args.jobs, claimers=args.claimers, batch=args.batch, rounds=args.rounds
        )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
