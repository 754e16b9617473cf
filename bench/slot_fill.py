"""How full a worker keeps its handler slots: W threads of jobs that sleep a millisecond, on
a backlog, with this tree's engine and another's in the same run (alternating rounds).

The bound is W jobs per millisecond: a worker that waits for the slowest job of each batch,
or for a round trip before each job, completes far fewer. Each side drains its own database
with `Runner(concurrency=W, batch_size=W).work()` (as `tickq work` runs), and the figure is
the completion rate over a window after a 2 s warm-up.

    python -m bench.slot_fill --before REF [--workers 4 16] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from .dependencies_cost import tree_at
from .hot_path_cost import run_child
from .server import env_or_local_server, fresh_database


def child(url: str, workers: int, seconds: float = 8.0) -> dict[str, list[float]]:
    """Completed jobs per second with `workers` handler threads (run in a fresh process)."""
    import psycopg

    from queue_core import PostgresStore, Registry, Runner
    from queue_core.migrate import migrate
    from queue_core.model.validation import job_spec

    registry = Registry()
    done = [0]
    lock = threading.Lock()

    @registry.task("sleep")
    def sleep(job: Any) -> None:
        time.sleep(0.001)
        with lock:
            done[0] += 1

    backlog = int(workers * 1000 * (seconds + 4))
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
        specs = [job_spec("sleep", {"i": i}) for i in range(1000)]
        store = PostgresStore(conn)
        for _ in range(backlog // 1000):
            store.enqueue_many(specs)
    stop = threading.Event()
    rate: list[float] = []

    def window() -> None:
        time.sleep(2)
        first, began = done[0], time.monotonic()
        time.sleep(seconds)
        rate.append((done[0] - first) / (time.monotonic() - began))
        stop.set()

    timer = threading.Thread(target=window)
    timer.start()
    with (
        psycopg.connect(url, autocommit=True) as own,
        Runner(PostgresStore(own), registry, batch_size=workers, concurrency=workers) as runner,
    ):
        runner.work(stop=stop)
    timer.join()
    return {"rate": rate}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.slot_fill", description=__doc__)
    parser.add_argument("--before", required=True, help="the engine at this git ref beside")
    parser.add_argument("--workers", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--rounds", type=int, default=2, help="rounds to take medians over")
    args = parser.parse_args(argv)
    with env_or_local_server() as admin_url, tree_at(args.before) as before:
        this = Path(__file__).resolve().parents[1]
        sides = {args.before: before, "this tree": this}
        rates: dict[tuple[str, int], list[float]] = {}
        for n in range(args.rounds):
            for workers in args.workers:
                for name, tree in sides.items():
                    with fresh_database(admin_url, f"slotfill_{n}_{workers}") as url:
                        got = run_child(tree, url, workers, "bench.slot_fill:child")
                    rates.setdefault((name, workers), []).extend(got["rate"])
    print(f"| W | bound | jobs/s @{args.before} | jobs/s | ratio | of the bound |")
    print("|---|---|---|---|---|---|")
    for workers in args.workers:
        old = statistics.median(rates[(args.before, workers)])
        new = statistics.median(rates[("this tree", workers)])
        bound = workers * 1000
        print(
            f"| {workers} | {bound:,} | {old:,.0f} | {new:,.0f} | {new / old:.2f} "
            f"| {old / bound:.2f} → {new / bound:.2f} |"
        )
    print(f"\nmedians of {args.rounds} rounds, 8 s windows after a 2 s warm-up")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
