"""Python work and round trips per job on the hot path: this tree's engine against another.

Counts, not timings, so a shared machine cannot blur them: for single enqueues (keyless and
keyed), bulk enqueues of ten, and drains at batch 10 and 100, the Python function calls the
client makes (cProfile's count, builtins included) and the round trips it waits for (libpq's
trace), per job. The pipeline's hand-off to its database thread is switched off in both
engines, since that choice follows measured durations and moves calls between threads; each
count then repeats exactly from run to run. CPU time per job (median over the rounds) is
shown beside the counts as a hint only.

    python -m bench.hot_path_cost --before REF [--jobs 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .dependencies_cost import tree_at
from .server import env_or_local_server, fresh_database

ROOT = Path(__file__).resolve().parents[1]
BATCHES = (10, 100)
BULK = 10


def engine_pipeline() -> Any:
    """The pipeline module of the engine first on the path, whichever layout it has (an
    engine from before the packages by concern kept it at queue_core.pipeline; importing
    queue_core.runner.pipeline there would find this tree's, which that engine never runs)."""
    import importlib

    import queue_core

    root = Path(queue_core.__file__).parent
    for name in ("queue_core.runner.pipeline", "queue_core.pipeline"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if Path(module.__file__ or "").resolve().is_relative_to(root.resolve()):
            return module
    raise RuntimeError(f"no pipeline module in the engine at {root}")


def child(url: str, jobs: int) -> dict[str, list[float]]:
    """Per job of each operation: calls, round trips and CPU microseconds, with whichever
    engine is first on the path."""
    import psycopg

    from queue_core import PostgresStore, Registry, Runner
    from queue_core.migrate import migrate

    from .roundtrips import count_round_trips

    pipeline = engine_pipeline()
    pipeline.OVERLAP_MIN_SECONDS = float("inf")  # one thread: the counts repeat exactly
    registry = Registry()
    registry.task("noop")(lambda job: None)
    found: dict[str, list[float]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
        store = PostgresStore(conn)

        def measure(name: str, run: Callable[[], Any]) -> None:
            profile = cProfile.Profile()
            with count_round_trips(conn) as trips:
                began = time.process_time()
                profile.enable()
                run()
                profile.disable()
                cpu = time.process_time() - began
            calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
            found[name] = [calls / jobs, trips.count / jobs, cpu / jobs * 1e6]

        plain = [registry.spec("noop", {"i": i}) for i in range(jobs)]
        keyed = [registry.spec("noop", {"i": i}, idempotency_key=f"k{i}") for i in range(jobs)]
        store.enqueue(registry.spec("noop"))  # the statement caches and the limits probe
        measure("enqueue one, keyless", lambda: [store.enqueue(s) for s in plain])
        measure("enqueue one, keyed", lambda: [store.enqueue(s) for s in keyed])
        measure(
            f"enqueue_many of {BULK}",
            lambda: [store.enqueue_many(plain[i : i + BULK]) for i in range(0, jobs, BULK)],
        )
        for batch in BATCHES:
            with Runner(store, registry, batch_size=batch) as runner:
                runner.tick()  # the enqueues' jobs, and the claim statement's first run
                store.enqueue_many(plain)  # the drain's backlog: `jobs` jobs
                measure(f"drain at batch {batch}", runner.tick)
    return found


def run_side(admin_url: str, tree: Path, name: str, jobs: int) -> dict[str, list[float]]:
    with fresh_database(admin_url, f"hotpath_{name}") as url:
        return run_child(tree, url, jobs)


def run_child(
    tree: Path, url: str, jobs: int, child: str = "bench.hot_path_cost:child"
) -> dict[str, list[float]]:
    """`child` (module:function) of this tree's bench/ in a fresh process, with the engine
    of `tree` imported first (so both sides run the same measurement code)."""
    module, function = child.split(":")
    code = (
        "import json, sys; sys.path[:0] = [sys.argv[1]]; import queue_core;"
        "sys.path.insert(0, sys.argv[2]);"
        f"from {module} import {function} as child;"
        "print(json.dumps(child(sys.argv[3], int(sys.argv[4]))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tree), str(ROOT), url, str(jobs)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": ""},
    )
    result: dict[str, list[float]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hot_path_cost", description=__doc__)
    parser.add_argument("--before", required=True, help="the engine at this git ref beside")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per operation")
    parser.add_argument("--rounds", type=int, default=3, help="rounds for the CPU medians")
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, list[float]]]] = {"before": [], "after": []}
    with tree_at(args.before) as before, env_or_local_server() as admin_url:
        trees = {"before": before, "after": ROOT}
        for round_ in range(args.rounds):
            order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
            for side in order:
                runs[side].append(run_side(admin_url, trees[side], side, args.jobs))
    print(render(runs, args.before))
    return 0


def render(runs: dict[str, list[dict[str, list[float]]]], before: str) -> str:
    lines = [
        f"| per job | calls @{before} | calls | round trips @{before} | round trips "
        f"| CPU µs @{before} | CPU µs |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in runs["after"][0]:
        cells = []
        for index, digits in ((0, 1), (1, 3), (2, 0)):
            for side in ("before", "after"):
                value = statistics.median(run[name][index] for run in runs[side])
                cells.append(f"{value:,.{digits}f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append(f"\nCPU: medians of {len(runs['after'])} rounds, a hint only (a shared machine)")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
