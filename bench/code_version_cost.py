"""What recording code versions costs durable steps: round trips per step and per resume,
and time per step, with and without it, in one run.

Without: the engine at a git ref before code versions (default `b83a2d9`); with: this tree.
Each runs in its own process and database on one server, rounds alternating, the same job
shapes: one job of `--steps` no-op steps run by one tick (each step one fenced insert, now
carrying the version), and one job of `--resume-steps` steps under a zero time budget, so
every claim is a resume cycle (claim, load, which records the version, one step, suspension).
Round trips are counted from libpq's trace (bench/roundtrips.py).

    .venv/bin/python -m bench.code_version_cost [--steps 500] [--resume-steps 100] [--rounds 3]

Uses TICKQ_DATABASE_URL (a superuser able to create databases) or a throwaway durable
local server (fsync on, as in production).
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

from .server import benchmark_server, fresh_database
from .steps_cost import engine_at, migrate_with

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "b83a2d9"

# Runs both job shapes with the engine on sys.path; prints round trips and seconds as JSON.
RUN = """
import json, os, sys, time, psycopg
from bench.roundtrips import count_round_trips
from queue_core import PostgresStore, Registry, Runner
url, steps, resume_steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.environ["TICKQ_CODE_VERSION"] = "bench-v1"
registry = Registry()

@registry.task("many-steps", max_attempts=1, lease_seconds=600)
def many_steps(job):
    for i in range(steps):
        job.step(f"s{i}", lambda: None)

@registry.task("resumable", lease_seconds=600, step_seconds=1)
def resumable(job):
    for i in range(resume_steps):
        job.step(f"s{i}", lambda: None)

with psycopg.connect(url, autocommit=True) as conn:
    conn.execute("delete from tickq.jobs")
    store = PostgresStore(conn)
    store.enqueue(registry.spec("many-steps", {}))
    with Runner(store, registry, concurrency=1) as runner:
        with count_round_trips(conn) as trips:
            began = time.perf_counter()
            report = runner.tick()
            seconds = time.perf_counter() - began
    assert report.steps == steps and report.succeeded == 1, report
    job_id = store.enqueue(registry.spec("resumable", {})).id
    with Runner(store, registry, concurrency=1, time_left=lambda: 0.0) as runner:
        cycles = 0
        with count_round_trips(conn) as resume_trips:
            while not store.get(job_id).is_terminal:
                runner.tick()
                cycles += 1
    recorded = conn.execute(
        "select count(*) from tickq.job_steps where job_id = %s and to_jsonb(job_steps) ? "
        "'code_version' and to_jsonb(job_steps)->>'code_version' = 'bench-v1'",
        (job_id,),
    ).fetchone()[0]
print(json.dumps({"trips": trips.count, "seconds": seconds, "resume_trips": resume_trips.count,
                  "cycles": cycles, "steps_with_version": recorded}))
"""


def run(tree: Path, url: str, steps: int, resume_steps: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", RUN, url, str(steps), str(resume_steps)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def compare(admin: str, *, steps: int, resume_steps: int, rounds: int, ref: str) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"without": [], "with": []}
    with (
        engine_at(ref) as before,
        fresh_database(admin, "without_versions") as without_url,
        fresh_database(admin, "with_versions") as with_url,
    ):
        migrate_with(before, without_url)
        migrate_with(ROOT, with_url)
        for _ in range(rounds):
            runs["without"].append(run(before, without_url, steps, resume_steps))
            runs["with"].append(run(ROOT, with_url, steps, resume_steps))

    def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
        last = results[-1]
        return {
            "round_trips_per_step": round(last["trips"] / steps, 3),
            "round_trips_per_resume_cycle": round(last["resume_trips"] / last["cycles"], 3),
            "ms_per_step_median": round(
                statistics.median(r["seconds"] for r in results) / steps * 1000, 3
            ),
            "steps_with_a_version": last["steps_with_version"],
        }

    return {
        "before_ref": ref,
        "steps": steps,
        "resume_steps": resume_steps,
        "rounds": rounds,
        "without_versions": summary(runs["without"]),
        "with_versions": summary(runs["with"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="steps of the long job")
    parser.add_argument("--resume-steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default=BEFORE, help="git ref of the engine before")
    args = parser.parse_args(argv)
    with benchmark_server(os.environ.get("TICKQ_DATABASE_URL")) as admin:
        result = compare(
            admin,
            steps=args.steps,
            resume_steps=args.resume_steps,
            rounds=args.rounds,
            ref=args.before,
        )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
