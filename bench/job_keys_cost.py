"""Enqueue throughput of two versions of the engine side by side: this tree and another
checkout (such as the commit before the key table of migration 0013), keyless and keyed.

Each version runs in its own interpreter with its own tree first on the path, against its
own freshly migrated database on one server; rounds alternate which version goes first, so
drift favours neither. A round bulk-enqueues batches and single-enqueues jobs, without keys
and with a fresh key per job, then drains a backlog of each in one tick at batch 100.

    mkdir /tmp/before && git archive <commit> | tar -x -C /tmp/before
    .venv/bin/python -m bench.job_keys_cost --before /tmp/before [--jobs 20000] [--rounds 5]
    .venv/bin/python -m bench.job_keys_cost --before . --triggers-only [--jobs 100000]

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
from contextlib import ExitStack
from pathlib import Path
from typing import Any

BATCH = 1000
KINDS = (
    "bulk_keyless",
    "bulk_keyed",
    "single_keyless",
    "single_keyed",
    "drain_keyless",
    "drain_keyed",
)
DRAIN_BATCH = 100
HERE = Path(__file__).resolve().parent.parent


def one_round(url: str, jobs: int, singles: int, run: str) -> dict[str, float]:
    """Jobs per second of each kind of enqueue, with the engine importable here."""
    import psycopg

    from queue_core import PostgresStore
    from queue_core.model.validation import job_spec

    rates: dict[str, float] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("truncate tickq.jobs cascade")
        store = PostgresStore(conn)
        for keyed in (False, True):
            began = time.perf_counter()
            for b in range(jobs // BATCH):
                store.enqueue_many(
                    [
                        job_spec(
                            "work", {"i": i}, idempotency_key=f"{run}-{b}-{i}" if keyed else None
                        )
                        for i in range(BATCH)
                    ]
                )
            rates["bulk_keyed" if keyed else "bulk_keyless"] = jobs / (time.perf_counter() - began)
            began = time.perf_counter()
            for i in range(singles):
                store.enqueue(
                    job_spec("work", {"i": i}, idempotency_key=f"{run}-s-{i}" if keyed else None)
                )
            rates["single_keyed" if keyed else "single_keyless"] = singles / (
                time.perf_counter() - began
            )
        for keyed in (False, True):
            rates["drain_keyed" if keyed else "drain_keyless"] = _drain(conn, jobs, keyed, run)
    return rates


def _drain(conn: Any, jobs: int, keyed: bool, run: str) -> float:
    """Jobs per second that one tick at batch 100 runs to success: the finish updates no
    longer maintain the jobs' unique key index."""
    from queue_core import PostgresStore, Registry, Runner
    from queue_core.model.validation import job_spec

    conn.execute("truncate tickq.jobs cascade")
    registry = Registry()
    registry.task("noop")(lambda job: None)
    store = PostgresStore(conn)
    for b in range(jobs // BATCH):
        store.enqueue_many(
            [
                job_spec("noop", idempotency_key=f"{run}-d-{b}-{i}" if keyed else None)
                for i in range(BATCH)
            ]
        )
    runner = Runner(store, registry, batch_size=DRAIN_BATCH, concurrency=1)
    began = time.perf_counter()
    report = runner.tick()
    took = time.perf_counter() - began
    assert report.succeeded == jobs, report
    return jobs / took


def _in_tree(tree: Path, url: str, jobs: int, singles: int, run: str) -> dict[str, float]:
    """one_round in a child interpreter that imports queue_core from `tree`."""
    # Only `tree` is on the child's path; this file is run by its path, so the measuring
    # code is the same for both versions and the engine is the tree's.
    code = (
        "import json, runpy, sys; sys.path.insert(0, sys.argv[1]);"
        "f = runpy.run_path(sys.argv[2])['one_round'];"
        "print(json.dumps(f(sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tree), __file__, url, str(jobs), str(singles), run],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},
        cwd=tree,
    ).stdout
    return dict(json.loads(out.splitlines()[-1]))


def _migrate_in_tree(tree: Path, url: str) -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import psycopg;"
        "from queue_core.migrate import migrate;"
        "c = psycopg.connect(sys.argv[2]); migrate(c); c.commit()"
    )
    subprocess.run([sys.executable, "-c", code, str(tree), url], check=True, cwd=tree)


def measure(
    trees: dict[str, Path], urls: dict[str, str], *, jobs: int, singles: int, rounds: int
) -> dict[str, Any]:
    rates: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for name, tree in trees.items():  # warm caches and plans
        _in_tree(tree, urls[name], BATCH, 100, f"warm-{name}")
    names = list(trees)
    for n in range(rounds):
        for name in names if n % 2 == 0 else names[::-1]:
            rates[name].append(_in_tree(trees[name], urls[name], jobs, singles, f"r{n}-{name}"))
    result: dict[str, Any] = {"jobs": jobs, "singles": singles, "rounds": rounds}
    for kind in KINDS:
        medians = {name: statistics.median(r[kind] for r in rates[name]) for name in names}
        result[kind] = {name: [round(r[kind]) for r in rates[name]] for name in names}
        result[f"{kind}_after_over_before"] = round(medians["after"] / medians["before"], 3)
        # Each round's two versions ran back to back: the median of those paired ratios
        # is the figure least moved by load that changes between rounds.
        paired = [a[kind] / b[kind] for a, b in zip(rates["after"], rates["before"], strict=True)]
        result[f"{kind}_paired_ratio_median"] = round(statistics.median(paired), 3)
    return result


# The key triggers (queue_core/schema/triggers.sql) whose WHEN clause every update of a job
# evaluates.
KEY_TRIGGERS = ("jobs_key_free", "jobs_key_take")


def trigger_cost(url: str, *, jobs: int, rounds: int) -> dict[str, Any]:
    """What the key triggers' WHEN clauses cost updates of keyless jobs: the same updates
    (claim-like, then finish-like, over `jobs` rows) with the triggers enabled and disabled,
    alternating which goes first, in this tree's schema."""
    import psycopg

    times: dict[bool, list[float]] = {True: [], False: []}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("truncate tickq.jobs cascade")
        conn.execute(
            "insert into tickq.jobs (type) select 'noop' from generate_series(1, %s)", (jobs,)
        )
        conn.execute("vacuum analyze tickq.jobs")
        for n in range(rounds + 1):
            for enabled in (n % 2 == 0, n % 2 == 1):
                state = "enable" if enabled else "disable"
                for name in KEY_TRIGGERS:
                    conn.execute(f"alter table tickq.jobs {state} trigger {name}")
                began = time.perf_counter()
                conn.execute(
                    "update tickq.jobs set status = 'running', attempts = attempts + 1,"
                    " lease_token = gen_random_uuid(), lease_until = now() + interval '1 minute',"
                    " started_at = now(), updated_at = now()"
                )
                conn.execute(
                    "update tickq.jobs set status = 'queued', attempts = 0, lease_token = null,"
                    " lease_until = null, started_at = null, updated_at = now()"
                )
                took = time.perf_counter() - began
                if n:  # the first pair warms caches
                    times[enabled].append(took)
                conn.execute("vacuum tickq.jobs")
        for name in KEY_TRIGGERS:
            conn.execute(f"alter table tickq.jobs enable trigger {name}")
    paired = [on / off for on, off in zip(times[True], times[False], strict=True)]
    return {
        "updates_per_round": 2 * jobs,
        "seconds_triggers_on": [round(t, 3) for t in times[True]],
        "seconds_triggers_off": [round(t, 3) for t in times[False]],
        "time_on_over_off_paired_median": round(statistics.median(paired), 3),
    }


def main() -> None:
    from .server import env_or_local_server, fresh_database

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout of the old engine")
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--singles", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--triggers-only",
        action="store_true",
        help="measure only the key triggers' cost on keyless updates (this tree)",
    )
    args = parser.parse_args()
    if args.triggers_only:
        with env_or_local_server() as admin, fresh_database(admin, "keys_triggers") as url:
            _migrate_in_tree(HERE, url)
            print(json.dumps(trigger_cost(url, jobs=args.jobs, rounds=args.rounds), indent=2))
        return
    trees = {"before": args.before.resolve(), "after": HERE}
    with env_or_local_server() as admin, ExitStack() as stack:
        urls = {name: stack.enter_context(fresh_database(admin, f"keys_{name}")) for name in trees}
        for name, tree in trees.items():
            _migrate_in_tree(tree, urls[name])
        result = measure(trees, urls, jobs=args.jobs, singles=args.singles, rounds=args.rounds)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
