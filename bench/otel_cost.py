"""What OpenTelemetry costs, and what it costs when off: cold start and drain, in one run.

* Cold start: `python -X importtime` of every Lambda handler module, in fresh processes,
  this tree against the engine at `--before` (same run, rounds alternating), with
  OpenTelemetry not configured; the sum of the top-level imports' cumulative time, and
  whether any opentelemetry module was loaded.
* Drain: a backlog of no-op jobs drained at batch 10 and 100 by this tree with OpenTelemetry
  off (TICKQ_OTEL=off), on with the SDK configured (a tracer provider with a batch span
  processor into the in-memory exporter, a meter provider with an in-memory reader, the
  trace context recorded at enqueue), and by the engine at `--before`; each drain in a
  fresh process on a fresh database, rounds alternating. Ratios to the before-engine.

    python -m bench.otel_cost --before REF [--jobs 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from .dependencies_cost import tree_at
from .server import env_or_local_server, fresh_database

ROOT = Path(__file__).resolve().parents[1]
BATCHES = (10, 100)
HANDLERS = ("api", "tick", "enqueue", "maintenance", "scheduler", "migrate")


def import_child() -> dict[str, Any]:
    """Import every handler; what opentelemetry modules came with them."""
    import importlib

    for name in HANDLERS:
        importlib.import_module(f"tickq.functions.{name}")
    return {"otel_modules": sorted(m for m in sys.modules if m.startswith("opentelemetry"))}


def drain_child(url: str, jobs: int, batch: int, otel: bool) -> dict[str, Any]:
    """Enqueue `jobs` no-op jobs (inside a span when `otel`), then drain them at `batch`;
    seconds of the drain per job."""
    import time

    import psycopg

    from queue_core import PostgresStore, Registry, Runner, enqueue_many
    from queue_core.migrate import migrate

    span = None
    if otel:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
        span = trace.get_tracer("bench").start_as_current_span("enqueue")
    registry = Registry()
    registry.task("noop")(lambda job: None)
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
        requests = [{"type": "noop"}] * 100
        if span is not None:
            with span:
                for _ in range(jobs // 100):
                    enqueue_many(conn, requests, using=registry)
        else:
            for _ in range(jobs // 100):
                enqueue_many(conn, requests, using=registry)
        with Runner(PostgresStore(conn), registry, batch_size=batch, concurrency=1) as runner:
            began = time.perf_counter()
            report = runner.tick()
            took = time.perf_counter() - began
    assert report.succeeded == jobs, report
    return {"per_job_us": took / jobs * 1e6}


def _run(
    tree: Path, code: str, *args: str, env: dict[str, str], flags: tuple[str, ...] = ()
) -> Any:
    prelude = "import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[2]];"
    done = subprocess.run(
        [sys.executable, *flags, "-c", prelude + code, str(tree), str(ROOT), *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": "", **env},
    )
    return done


def import_time(tree: Path) -> tuple[float, list[str]]:
    """Milliseconds importing the handler modules take (the sum over the top-level imports
    -X importtime reports), and the opentelemetry modules loaded."""
    env = {"TICKQ_OTEL": "off"}
    done = _run(
        tree,
        "from bench.otel_cost import import_child; print(json.dumps(import_child()))",
        env=env,
        flags=("-X", "importtime"),
    )
    total = 0
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue  # the header, or another line
        if not parts[2].startswith("  "):  # top level: nested imports are indented
            total += int(parts[1])
    modules = json.loads(done.stdout.strip().splitlines()[-1])["otel_modules"]
    return total / 1000, modules


def drain(admin: str, tree: Path, name: str, jobs: int, batch: int, otel: bool) -> float:
    with fresh_database(admin, f"otel_{name}_{batch}") as url:
        done = _run(
            tree,
            "from bench.otel_cost import drain_child;"
            "print(json.dumps(drain_child(sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),"
            " sys.argv[6] == 'on')))",
            url,
            str(jobs),
            str(batch),
            "on" if otel else "off",
            env={"TICKQ_OTEL": "on" if otel else "off"},
        )
    return float(json.loads(done.stdout.strip().splitlines()[-1])["per_job_us"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.otel_cost", description=__doc__)
    parser.add_argument("--before", required=True, help="the engine at this git ref beside")
    parser.add_argument("--jobs", type=int, default=3000, help="jobs per drain (x100)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    imports: dict[str, list[float]] = {"before": [], "after": []}
    loaded: set[str] = set()
    drains: dict[tuple[str, int], list[float]] = {}
    sides = {"before": False, "after, otel off": False, "after, otel on": True}
    with tree_at(args.before) as before, env_or_local_server() as admin:
        trees = {"before": before, "after": ROOT}
        for round_ in range(args.rounds):
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            for side in ("before", "after") if round_ % 2 == 0 else ("after", "before"):
                ms, modules = import_time(trees[side])
                imports[side].append(ms)
                if side == "after":
                    loaded.update(modules)
            for batch in BATCHES:
                for side in order:
                    tree = trees["before" if side == "before" else "after"]
                    drains.setdefault((side, batch), []).append(
                        drain(
                            admin,
                            tree,
                            side.replace(",", "").replace(" ", "_"),
                            args.jobs,
                            batch,
                            sides[side],
                        )
                    )
    print(render(args.before, imports, loaded, drains))
    return 0


def render(
    before: str,
    imports: dict[str, list[float]],
    loaded: set[str],
    drains: dict[tuple[str, int], list[float]],
) -> str:
    b, a = statistics.median(imports["before"]), statistics.median(imports["after"])
    lines = [
        f"cold start (every handler imported, -X importtime, median of {len(imports['after'])}):"
        f" @{before} {b:.0f} ms, this tree {a:.0f} ms, ratio {a / b:.3f};"
        f" opentelemetry modules loaded: {sorted(loaded) or 'none'}",
        "",
        f"| drain, µs per job | @{before} | otel off | ratio | otel on (SDK) | ratio |",
        "|---|---|---|---|---|---|",
    ]
    for batch in BATCHES:
        base = statistics.median(drains[("before", batch)])
        off = statistics.median(drains[("after, otel off", batch)])
        on = statistics.median(drains[("after, otel on", batch)])
        lines.append(
            f"| batch {batch} | {base:.1f} | {off:.1f} | {off / base:.3f} | {on:.1f} |"
            f" {on / base:.3f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
