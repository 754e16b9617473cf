"""What debounce and throttle cost, and that jobs using neither pay nothing for them.

Two parts, in one run:

* Plain enqueue and drain, this tree against `--before REF` (bench.hot_path_cost's counts:
  Python calls and round trips per job, CPU as a hint), each side in a fresh process and
  database, taking turns round by round.
* Gated enqueues on this tree, per job beside a plain enqueue measured in the same process:
  a burst of one debounce key (every enqueue after the first moves the key's job), a new
  debounce key each time (every enqueue makes a job), and a burst of one throttle key. Wall
  time is shown as a ratio to the plain enqueue of the same round, never as an absolute.

    python -m bench.gate_cost --before REF [--jobs 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import hot_path_cost
from .dependencies_cost import tree_at
from .server import env_or_local_server, fresh_database

ROOT = Path(__file__).resolve().parents[1]
PLAIN = "enqueue one, keyless"


def gated_child(url: str, jobs: int) -> dict[str, list[float]]:
    """Per job of each gated enqueue and of a plain one: calls, round trips, CPU and wall
    microseconds."""
    import psycopg

    from queue_core import Debounce, PostgresStore, Registry, Throttle
    from queue_core.migrate import migrate

    from .roundtrips import count_round_trips

    registry = Registry()
    found: dict[str, list[float]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
        store = PostgresStore(conn)

        def measure(name: str, specs: list[Any]) -> None:
            profile = cProfile.Profile()
            with count_round_trips(conn) as trips:
                began, wall = time.process_time(), time.perf_counter()
                profile.enable()
                for spec in specs:
                    store.enqueue(spec)
                profile.disable()
                cpu, wall = time.process_time() - began, time.perf_counter() - wall
            calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
            found[name] = [calls / jobs, trips.count / jobs, cpu / jobs * 1e6, wall / jobs * 1e6]

        def specs(make: Callable[[int], dict[str, Any]]) -> list[Any]:
            return [registry.spec("noop", {"i": i}, **make(i)) for i in range(jobs)]

        store.enqueue(registry.spec("noop", debounce=Debounce("warm", 1)))  # statement caches
        measure(PLAIN, specs(lambda i: {}))
        measure("debounced, one key", specs(lambda i: {"debounce": Debounce("burst", 60)}))
        measure("debounce, a new key each", specs(lambda i: {"debounce": Debounce(f"k{i}", 60)}))
        measure("throttled, one key", specs(lambda i: {"throttle": Throttle("burst", 60)}))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gate_cost", description=__doc__)
    parser.add_argument("--before", required=True, help="the engine at this git ref beside")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs per operation")
    parser.add_argument("--rounds", type=int, default=3, help="rounds for the medians")
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, list[float]]]] = {"before": [], "after": []}
    gated: list[dict[str, list[float]]] = []
    with tree_at(args.before) as before, env_or_local_server() as admin_url:
        trees = {"before": before, "after": ROOT}
        for round_ in range(args.rounds):
            order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
            for side in order:
                with fresh_database(admin_url, f"gates_{side}") as url:
                    runs[side].append(hot_path_cost.run_child(trees[side], url, args.jobs))
            with fresh_database(admin_url, "gates_gated") as url:
                gated.append(
                    hot_path_cost.run_child(ROOT, url, args.jobs, "bench.gate_cost:gated_child")
                )
    print(hot_path_cost.render(runs, args.before))
    print()
    print(render_gated(gated))
    return 0


def render_gated(rounds: list[dict[str, list[float]]]) -> str:
    lines = [
        "| per job, this tree | calls | round trips | CPU µs | wall ÷ plain enqueue |",
        "|---|---|---|---|---|",
    ]
    for name in rounds[0]:
        calls, trips, cpu = (
            statistics.median(run[name][index] for run in rounds) for index in range(3)
        )
        ratio = statistics.median(run[name][3] / run[PLAIN][3] for run in rounds)
        lines.append(f"| {name} | {calls:,.1f} | {trips:,.3f} | {cpu:,.0f} | {ratio:.2f} |")
    lines.append(f"\nmedians of {len(rounds)} rounds; wall as a ratio within each round")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
