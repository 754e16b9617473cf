"""What the application users' admission trigger (jobs_app_admit) costs workers' enqueues.

`jobs_app_admit` fires only when a transaction names a user (tickq.user_id); a worker's
insert evaluates its WHEN condition per row and queues nothing. Rounds alternate between
the trigger enabled and disabled in one run on one server (which goes first alternates),
so the ratio is not skewed by a noisy machine: each round bulk-enqueues the same batches
and single-enqueues jobs.

    .venv/bin/python -m bench.app_admit_cost [--jobs 20000] [--singles 2000] [--rounds 5]

Uses TICKQ_DATABASE_URL (a superuser able to create databases) or a throwaway local server.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import psycopg

from queue_core import PostgresStore
from queue_core.migrate import migrate
from queue_core.validation import job_spec

from .server import env_or_local_server, fresh_database

BATCH = 1000


def _round(url: str, jobs: int, singles: int, enabled: bool) -> tuple[float, float]:
    """(bulk jobs per second, single enqueues per second) with the trigger on or off."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("truncate tickq.jobs cascade")
        state = "enable" if enabled else "disable"
        conn.execute(f"alter table tickq.jobs {state} trigger jobs_app_admit")
        store = PostgresStore(conn)
        specs = [job_spec("work", {"i": i}) for i in range(BATCH)]
        began = time.perf_counter()
        for _ in range(jobs // BATCH):
            store.enqueue_many(specs)
        bulk = jobs / (time.perf_counter() - began)
        one = job_spec("work", {"i": 0})
        began = time.perf_counter()
        for _ in range(singles):
            store.enqueue(one)
        single = singles / (time.perf_counter() - began)
        conn.execute("alter table tickq.jobs enable trigger jobs_app_admit")
    return bulk, single


def measure(url: str, *, jobs: int, singles: int, rounds: int) -> dict[str, Any]:
    on: list[tuple[float, float]] = []
    off: list[tuple[float, float]] = []
    _round(url, BATCH, 100, enabled=True)  # warm caches and plans
    for n in range(rounds):  # alternate which goes first, so drift favours neither
        for enabled in (n % 2 == 0, n % 2 == 1):
            (on if enabled else off).append(_round(url, jobs, singles, enabled=enabled))

    def ratio(index: int) -> float:
        return round(
            statistics.median(r[index] for r in on) / statistics.median(r[index] for r in off),
            3,
        )

    return {
        "jobs": jobs,
        "singles": singles,
        "rounds": rounds,
        "bulk_jobs_per_s_trigger_off": [round(r[0]) for r in off],
        "bulk_jobs_per_s_trigger_on": [round(r[0]) for r in on],
        "single_per_s_trigger_off": [round(r[1]) for r in off],
        "single_per_s_trigger_on": [round(r[1]) for r in on],
        "bulk_ratio_on_over_off": ratio(0),
        "single_ratio_on_over_off": ratio(1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--singles", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with env_or_local_server() as admin, fresh_database(admin, "app_admit") as url:
        with psycopg.connect(url) as conn:
            migrate(conn)
        result = measure(url, jobs=args.jobs, singles=args.singles, rounds=args.rounds)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
