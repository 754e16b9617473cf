"""`python -m bench`: the whole comparison on one PostgreSQL; see docs/benchmarks.md."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

from . import claim_cost, harness, report
from .server import benchmark_server, server_description

QUICK = harness.Sizes(
    drain_jobs=400,
    bulk_jobs=1000,
    single_jobs=50,
    latency_samples=10,
    finished_rows=10_000,
    runs=1,
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, one run (smoke)")
    parser.add_argument("--runs", type=int, help="runs to take medians over (default 3)")
    parser.add_argument("--jobs", type=int, help="backlog per drain and per bulk enqueue")
    parser.add_argument(
        "--finished-rows", type=int, help="finished jobs beside the claim backlog (default 1M)"
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("TICKQ_DATABASE_URL"),
        help="superuser URL of an existing server (default: a throwaway durable one)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results"), help="JSON + PNG dir")
    args = parser.parse_args(argv)
    for name in ("runs", "jobs", "finished_rows"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = QUICK if args.quick else harness.Sizes()
    if args.runs:
        sizes = replace(sizes, runs=args.runs)
    if args.jobs:
        sizes = replace(sizes, drain_jobs=args.jobs, bulk_jobs=args.jobs)
    if args.finished_rows:
        sizes = replace(sizes, finished_rows=args.finished_rows)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    samples = harness.Samples()
    with benchmark_server(args.database_url) as admin_url:
        server = server_description(admin_url)
        log(f"PostgreSQL {server['server_version']}, fsync={server['fsync']}")
        for run in range(sizes.runs):
            log(f"run {run + 1} of {sizes.runs}")
            harness.run_once(admin_url, sizes, samples, log)
        trips = harness.round_trips(admin_url)
        log(f"round trips per batch: {trips}")
        log(f"claim cost with {sizes.finished_rows:,} finished rows")
        claim = claim_cost.measure(admin_url, finished_rows=sizes.finished_rows)
        log(f"claim cost ratio {claim['ratio']:.2f}")
    extra = {
        "command": " ".join(["python -m bench", *(argv if argv is not None else sys.argv[1:])]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "postgresql": server,
        },
        "sizes": harness.describe_sizes(sizes),
        "round_trips_per_batch": trips,
        "claim_cost": claim,
        "seconds": round(time.perf_counter() - started, 1),
    }
    summary = report.summarize(samples, extra)
    print(report.render(summary))
    json_path, png_path = report.save(summary, args.out)
    log(f"wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
