"""Client overhead per batch: tickq's drain against the slim raw queue and the raw loop on
tickq's own table, at batch 10 (the Lambda default) and 100, taking turns round by round.

Every drain runs in a fresh Python process of its own (connected before the clock starts)
on a backlog enqueued just before it, one database per system on one server. With
`--before REF`, the engine as it was at REF (`git archive`, public API only) drains beside
this tree's, so a change to the engine is measured before and after in the same run.
`--profile` drains once more at batch 10 with each tickq under pyinstrument and prints where
the time went. `--fast-commits` uses a throwaway server without fsync, where a commit costs
next to nothing and the client's share of each batch shows most. `--overlap-switch` adds this
tree's engine with the database-thread overlap taken for every quick batch (as before
OVERLAP_MIN_SECONDS) and never taken. `--analyzed` analyzes each backlog before its drain, as
autovacuum does once a table has grown: the planner then prices the statements' plans by
the backlog (a fresh table has no statistics).

    python -m bench.overhead_cost [--jobs 5000] [--rounds 5] [--before REF] [--profile]
                                  [--fast-commits] [--overlap-switch] [--analyzed]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tickq.infra.local.postgres import LocalPostgres

from .dependencies_cost import tree_at
from .server import benchmark_server, fresh_database, server_description
from .systems import raw_side, slim_side, tickq_side

ROOT = Path(__file__).resolve().parents[1]
BATCHES = (10, 100)


@dataclass(frozen=True)
class Drainer:
    """One column of the table: who drains, from which tree, on which kind of table."""

    label: str
    system: str  # the drain to run in the child: "tickq", "raw-sql" or "slim-raw"
    tree: Path | None = None  # queue_core from this directory instead of this tree
    # With a value, this tree's pipeline.OVERLAP_MIN_SECONDS is set to it in the child.
    overlap_min: float | None = None


DRAINS: dict[str, Callable[..., Callable[[], int]]] = {
    "tickq": tickq_side.prepare_drain,
    "raw-sql": raw_side.prepare_drain,
    "slim-raw": slim_side.prepare_drain,
}
ENQUEUES: dict[str, Callable[[str, int], float]] = {
    "tickq": tickq_side.bulk_enqueue,
    "raw-sql": raw_side.bulk_enqueue,
    "slim-raw": slim_side.bulk_enqueue,
}
INSTALLS: dict[str, Callable[[str], None]] = {
    "tickq": tickq_side.install,
    "raw-sql": tickq_side.install,
    "slim-raw": slim_side.install,
}


def child(
    system: str, url: str, batch: int, profile: bool = False, overlap_min: str = "default"
) -> None:
    """Connect, wait for a line on stdin, drain, print `jobs seconds cpu_seconds` (the cpu
    time is this process's, all its threads: the client's overhead); with `profile`, then
    pyinstrument's text of the drain."""
    if overlap_min != "default":
        from .hot_path_cost import engine_pipeline

        pipeline = engine_pipeline()
        pipeline.OVERLAP_MIN_SECONDS = float(overlap_min)
    run = DRAINS[system](url, batch, "tick")
    print("ready", flush=True)
    sys.stdin.readline()
    profiler = None
    if profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0002)
        profiler.start()
    started, cpu = time.perf_counter(), time.process_time()
    done = run()
    print(done, time.perf_counter() - started, time.process_time() - cpu, flush=True)
    if profiler is not None:
        profiler.stop()
        print(profiler.output_text(unicode=False, color=False), flush=True)


def timed_drain(
    drainer: Drainer, url: str, batch: int, profile: bool = False
) -> tuple[int, float, float, str]:
    """(jobs, seconds, client cpu seconds, profile text) of one drain in a fresh process."""
    env = dict(os.environ)
    paths = [str(drainer.tree)] if drainer.tree else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(ROOT), env.get("PYTHONPATH", "")])
    overlap_min = "default" if drainer.overlap_min is None else str(drainer.overlap_min)
    command = [
        *("--child", drainer.system, url, str(batch)),
        *("profile" if profile else "time", overlap_min),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.overhead_cost", *command],
        cwd=drainer.tree or ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError(f"{drainer.label}: the drain process did not start")
    proc.stdin.write("go\n")
    proc.stdin.flush()
    done, seconds, cpu = proc.stdout.readline().split()
    text = proc.stdout.read()
    if proc.wait(timeout=60) != 0:
        raise RuntimeError(f"{drainer.label}: the drain process failed")
    return int(done), float(seconds), float(cpu), text


def analyze(url: str) -> None:
    """Statistics of the backlog just enqueued: a fresh table has none, and the planner
    prices a prepared statement's plans from them."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("analyze")


@contextlib.contextmanager
def server(url: str | None, fast_commits: bool) -> Iterator[str]:
    """The durable benchmark server, or with `fast_commits` one that never flushes."""
    if fast_commits and not url:
        with LocalPostgres() as fast:
            yield fast.url
        return
    with benchmark_server(url) as admin_url:
        yield admin_url


@contextlib.contextmanager
def drainers(before: str | None, overlap_switch: bool) -> Iterator[list[Drainer]]:
    mine = [Drainer("slim-raw", "slim-raw"), Drainer("raw-sql", "raw-sql")]
    mine.append(Drainer("tickq", "tickq"))
    if overlap_switch:
        mine.append(Drainer("tickq overlap-always", "tickq", overlap_min=0.0))
        mine.append(Drainer("tickq overlap-never", "tickq", overlap_min=float("inf")))
    if before is None:
        yield mine
        return
    with tree_at(before) as tree:
        yield [*mine, Drainer(f"tickq@{before}", "tickq", tree)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.overhead_cost", description=__doc__)
    parser.add_argument("--jobs", type=int, default=5000, help="backlog per drain")
    parser.add_argument("--rounds", type=int, default=5, help="rounds to take medians over")
    parser.add_argument("--before", help="also drain with the engine at this git ref")
    parser.add_argument(
        "--profile", action="store_true", help="profile a batch-10 drain of each tickq"
    )
    parser.add_argument(
        "--fast-commits",
        action="store_true",
        help="a throwaway server without fsync: commits cost nothing, the client shows",
    )
    parser.add_argument("--database-url", default=os.environ.get("TICKQ_DATABASE_URL"))
    parser.add_argument(
        "--overlap-switch",
        action="store_true",
        help="also drain with this tree's overlap on for every quick batch, and off",
    )
    parser.add_argument(
        "--analyzed",
        action="store_true",
        help="ANALYZE each backlog before its drain, as autovacuum does once a table grew",
    )
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        system, url, batch, mode, overlap_min = args.child
        child(system, url, int(batch), mode == "profile", overlap_min)
        return 0
    if args.jobs < 1 or args.rounds < 1:
        parser.error("--jobs and --rounds must be positive integers")
    rates: dict[tuple[str, int], list[float]] = {}
    cpus: dict[tuple[str, int], list[float]] = {}
    with (
        server(args.database_url, args.fast_commits) as admin_url,
        drainers(args.before, args.overlap_switch) as columns,
        contextlib.ExitStack() as stack,
    ):
        print(f"server: {server_description(admin_url)}", file=sys.stderr)
        urls = {}
        for drainer in columns:
            url = stack.enter_context(fresh_database(admin_url, drainer.system.replace("-", "_")))
            INSTALLS[drainer.system](url)
            urls[drainer.label] = url
        for round_ in range(args.rounds):
            # Who goes first rotates, so a load spike does not always hit the same column.
            shift = round_ % len(columns)
            for batch in BATCHES:
                for drainer in columns[shift:] + columns[:shift]:
                    url = urls[drainer.label]
                    ENQUEUES[drainer.system](url, args.jobs)
                    if args.analyzed:
                        analyze(url)
                    done, seconds, cpu, _ = timed_drain(drainer, url, batch)
                    if done < args.jobs:
                        raise RuntimeError(f"{drainer.label} ran {done} of {args.jobs} jobs")
                    rates.setdefault((drainer.label, batch), []).append(done / seconds)
                    # Client CPU per batch of `batch` jobs, in microseconds.
                    cpus.setdefault((drainer.label, batch), []).append(cpu / done * batch * 1e6)
            print(f"round {round_ + 1} of {args.rounds} done", file=sys.stderr, flush=True)
        print(render(rates, cpus, [d.label for d in columns], args.rounds))
        for drainer in columns if args.profile else ():
            if drainer.system == "tickq":
                url = urls[drainer.label]
                ENQUEUES[drainer.system](url, args.jobs)
                print(f"\n{drainer.label}, batch 10:")
                print(timed_drain(drainer, url, 10, profile=True)[3])
    return 0


def render(
    rates: dict[tuple[str, int], list[float]],
    cpus: dict[tuple[str, int], list[float]],
    labels: list[str],
    rounds: int,
) -> str:
    """Medians of the rates, the median of each round's ratio to the slim queue, and the
    client's CPU time per batch."""
    lines = ["| batch | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for batch in BATCHES:
        cells = [f"{statistics.median(rates[(label, batch)]):,.0f}" for label in labels]
        lines.append(f"| {batch} (jobs/s) | " + " | ".join(cells) + " |")
    for batch in BATCHES:
        slim = rates[("slim-raw", batch)]
        cells = []
        for label in labels:
            per_round = [a / b for a, b in zip(rates[(label, batch)], slim, strict=True)]
            low, high = min(per_round), max(per_round)
            cells.append(f"{statistics.median(per_round):.2f} [{low:.2f}-{high:.2f}]")
        lines.append(f"| {batch}: ÷ slim-raw | " + " | ".join(cells) + " |")
    for batch in BATCHES:
        cells = [f"{statistics.median(cpus[(label, batch)]):,.0f}" for label in labels]
        lines.append(f"| {batch}: client CPU per batch (µs) | " + " | ".join(cells) + " |")
    lines.append(f"\nmedians of {rounds} rounds; ratios per round, median [min-max]")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
