"""What the application users' admission trigger (jobs_app_admit) costs workers' enqueues.

`jobs_app_admit` fires only when a transaction names a user (tickq.user_id); a worker's
insert evaluates its WHEN condition per row and queues nothing. Rounds alternate between
the trigger enabled and disabled in one run on one server (which goes first alternates),
so the ratio is not skewed by a noisy machine: each round bulk-enqueues the same batches
and single-enqueues jobs.

    .venv/bin/python -m bench.app_admit_cost [--jobs 20000] [--singles 2000] [--rounds 5]

With --before REF it compares schemas instead: one database built by the migrations as they
were at REF, one by this tree's, on one server, driven by this tree's engine in alternating
rounds. Each round times plain jobs (a worker's bulk and single enqueues, and a drain that
claims and finishes them) and the application's path (a user's single enqueues and cancels,
which the admission trigger and the guard check). The ratios are this tree over REF.

    .venv/bin/python -m bench.app_admit_cost --before REF [--jobs 20000] [--singles 2000]

Uses TICKQ_DATABASE_URL (a superuser able to create databases) or a throwaway local server.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg

from queue_core import PostgresStore, Registry, Runner
from queue_core.migrate import migrate
from queue_core.model.validation import job_spec

from .dependencies_cost import tree_at
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


def _schema_round(url: str, jobs: int, singles: int) -> dict[str, float]:
    """Operations per second on one database: plain jobs, then the application's path."""
    registry = Registry()
    registry.task("work")(lambda job: None)
    found: dict[str, float] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("truncate tickq.jobs cascade")
        store = PostgresStore(conn)
        specs = [job_spec("work", {"i": i}) for i in range(BATCH)]

        def timed(name: str, count: int, run: Any) -> None:
            began = time.perf_counter()
            run()
            found[name] = count / (time.perf_counter() - began)

        timed(
            "worker bulk enqueue",
            jobs,
            lambda: [store.enqueue_many(specs) for _ in range(jobs // BATCH)],
        )
        one = job_spec("work", {"i": 0})
        timed(
            "worker single enqueue", singles, lambda: [store.enqueue(one) for _ in range(singles)]
        )
        total = jobs // BATCH * BATCH + singles
        with Runner(store, registry, batch_size=100) as runner:
            timed(
                "drain (claim + finish) at batch 100",
                total,
                runner.tick,
            )
        user = uuid4()
        app = PostgresStore(conn, user_id=user)
        mine = job_spec("work", {"i": 0}, user_id=user)
        ids: list[Any] = []
        timed(
            "app single enqueue",
            singles,
            lambda: ids.extend(app.enqueue(mine).id for _ in range(singles)),
        )
        timed("app cancel", len(ids), lambda: [app.cancel(i) for i in ids])
    return found


def _migrate_at(tree: Path, url: str) -> None:
    """Build `url`'s schema with the migrations of the tree `tree` (another git ref)."""
    code = (
        "import sys, psycopg; from queue_core.migrate import migrate;"
        " migrate(psycopg.connect(sys.argv[1]))"
    )
    subprocess.run(
        [sys.executable, "-c", code, url],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        check=True,
        capture_output=True,
    )


def compare(admin: str, before: str, *, jobs: int, singles: int, rounds: int) -> dict[str, Any]:
    """Same-run rates on REF's schema and this tree's, alternating which goes first."""
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    with (
        tree_at(before) as tree,
        fresh_database(admin, "admit_before") as url_before,
        fresh_database(admin, "admit_after") as url_after,
    ):
        _migrate_at(tree, url_before)
        with psycopg.connect(url_after) as conn:
            migrate(conn)
        urls = {"before": url_before, "after": url_after}
        for url in urls.values():
            _schema_round(url, BATCH, 100)  # warm caches and plans
        for n in range(rounds):
            for side in ("before", "after") if n % 2 == 0 else ("after", "before"):
                runs[side].append(_schema_round(urls[side], jobs, singles))
    names = list(runs["after"][0])
    median = {
        side: {k: statistics.median(r[k] for r in rs) for k in names} for side, rs in runs.items()
    }
    return {
        "before": before,
        "jobs": jobs,
        "singles": singles,
        "rounds": rounds,
        "per_second_median_before": {k: round(v) for k, v in median["before"].items()},
        "per_second_median_after": {k: round(v) for k, v in median["after"].items()},
        "ratio_after_over_before": {
            k: round(median["after"][k] / median["before"][k], 3) for k in names
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--singles", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", help="compare with the schema at this git ref (same run)")
    args = parser.parse_args()
    if args.before:
        with env_or_local_server() as admin:
            result = compare(
                admin, args.before, jobs=args.jobs, singles=args.singles, rounds=args.rounds
            )
        print(json.dumps(result, indent=2))
        return
    with env_or_local_server() as admin, fresh_database(admin, "app_admit") as url:
        with psycopg.connect(url) as conn:
            migrate(conn)
        result = measure(url, jobs=args.jobs, singles=args.singles, rounds=args.rounds)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
