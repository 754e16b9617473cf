"""What durable steps cost: nothing for jobs without steps, one short statement per step,
and a claim, a load and a suspension per resume.

1. Plain drain, before and after: the engine at a git ref without durable steps (default
   `c0f9969`, main just before they were merged) and this tree, each in its own process and
   database on one server, drain the same backlog of no-op jobs; rounds alternate, so the
   ratio is not skewed by a machine drifting.
2. Steps per second: one job of 1,000 no-op steps, run by one tick (each step one fenced
   insert, committed); then the same job run again after an operator retry, every step
   returned from storage (one load).
3. A resume: a job of 200 steps under a zero time budget suspends after every step, so each
   claim is one resume cycle: claim, load, one step, suspension.

    .venv/bin/python -m bench.steps_cost [--jobs 3000] [--rounds 5] [--baseline-ref c0f9969]

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
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path
from typing import Any

import psycopg

from queue_core import JobContext, PostgresStore, Registry, Runner, StepStore
from queue_core.migrate import migrate

from .server import benchmark_server, fresh_database

ROOT = Path(__file__).resolve().parents[1]
BASELINE_REF = "c0f9969"

# Drains a backlog of no-op jobs with the engine on sys.path; prints jobs per second.
DRAIN = """
import sys, time, psycopg
from queue_core import PostgresStore, Registry, Runner
from queue_core.model.validation import job_spec
url, jobs = sys.argv[1], int(sys.argv[2])
registry = Registry()
registry.task("noop")(lambda job: None)
with psycopg.connect(url, autocommit=True) as conn:
    conn.execute("delete from tickq.jobs")
    PostgresStore(conn).enqueue_many([job_spec("noop", {"i": i}) for i in range(jobs)])
    conn.execute("vacuum analyze tickq.jobs")
    with Runner(PostgresStore(conn), registry, batch_size=100, concurrency=1) as runner:
        began = time.perf_counter()
        report = runner.tick()
        seconds = time.perf_counter() - began
assert report.succeeded == jobs, report
print(jobs / seconds)
"""


@contextmanager
def engine_at(ref: str) -> Iterator[Path]:
    """The repository's tree at `ref`, extracted to a temporary directory."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tempfile.TemporaryDirectory(prefix="tickq-baseline-") as tmp:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        yield Path(tmp)


def drain_rate(tree: Path, url: str, jobs: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", DRAIN, url, str(jobs)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip())


def migrate_with(tree: Path, url: str) -> None:
    code = "import sys, psycopg\nfrom queue_core.migrate import migrate\n"
    code += "with psycopg.connect(sys.argv[1]) as conn:\n    migrate(conn)\n"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, "-c", code, url], cwd=tree, env=env, check=True)


def plain_drain(admin: str, *, jobs: int, rounds: int, ref: str) -> dict[str, Any]:
    before: list[float] = []
    after: list[float] = []
    with (
        engine_at(ref) as baseline,
        fresh_database(admin, "before") as before_url,
        fresh_database(admin, "after") as after_url,
    ):
        migrate_with(baseline, before_url)
        migrate_with(ROOT, after_url)
        drain_rate(baseline, before_url, min(jobs, 500))  # warm the server's caches
        drain_rate(ROOT, after_url, min(jobs, 500))
        for _ in range(rounds):
            before.append(drain_rate(baseline, before_url, jobs))
            after.append(drain_rate(ROOT, after_url, jobs))
    return {
        "baseline_ref": ref,
        "jobs": jobs,
        "rounds": rounds,
        "before_jobs_per_s": [round(x) for x in before],
        "after_jobs_per_s": [round(x) for x in after],
        "ratio_median": round(statistics.median(after) / statistics.median(before), 3),
    }


def step_rates(url: str, *, steps: int) -> dict[str, Any]:
    registry = Registry()

    @registry.task("many-steps", max_attempts=1, lease_seconds=600)
    def many_steps(job: JobContext) -> int:
        for i in range(steps):
            job.step(f"s{i}", lambda: None)
        if job.payload.get("fail"):
            raise RuntimeError("fail once, to be retried with every step stored")
        return steps

    with psycopg.connect(url, autocommit=True) as conn:
        store = PostgresStore(conn)
        job_id = store.enqueue(registry.spec("many-steps", {})).id
        with Runner(store, registry) as runner:
            began = time.perf_counter()
            report = runner.tick()
            first = time.perf_counter() - began
            assert report.steps == steps and report.succeeded == 1, report
            conn.execute("update tickq.jobs set status = 'dead' where id = %s", (job_id,))
            StepStore(store).retry(job_id, fresh=False)
            began = time.perf_counter()
            report = runner.tick()
            replay = time.perf_counter() - began
            assert report.steps == 0 and report.succeeded == 1, report
    return {
        "steps": steps,
        "first_run_seconds": round(first, 3),
        "steps_per_s": round(steps / first),
        "replay_seconds": round(replay, 4),
        "replayed_steps_per_s": round(steps / replay),
    }


def resume_cost(url: str, *, steps: int) -> dict[str, Any]:
    registry = Registry()

    @registry.task("resumable", lease_seconds=600, step_seconds=1)
    def resumable(job: JobContext) -> int:
        for i in range(steps):
            job.step(f"s{i}", lambda: None)
        return steps

    with psycopg.connect(url, autocommit=True) as conn:
        store = PostgresStore(conn)
        job_id = store.enqueue(registry.spec("resumable", {})).id
        with Runner(store, registry, time_left=lambda: 0.0) as runner:
            ticks = 0
            began = time.perf_counter()
            while not store.get(job_id).is_terminal:
                runner.tick()
                ticks += 1
            seconds = time.perf_counter() - began
    return {
        "steps": steps,
        "claims": ticks,
        "resumes": ticks - 1,
        "seconds_per_resume_cycle": round(seconds / ticks, 5),
        "note": "a cycle is a tick: claim, load the stored steps, one step, suspension",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3000, help="backlog per plain drain")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000, help="steps of the long job")
    parser.add_argument("--resume-steps", type=int, default=200)
    parser.add_argument("--baseline-ref", default=BASELINE_REF)
    args = parser.parse_args(argv)
    with benchmark_server(os.environ.get("TICKQ_DATABASE_URL")) as admin:
        result: dict[str, Any] = {
            "plain_drain": plain_drain(
                admin, jobs=args.jobs, rounds=args.rounds, ref=args.baseline_ref
            )
        }
        with fresh_database(admin, "steps") as url:
            with psycopg.connect(url) as conn:
                migrate(conn)
            result["steps"] = step_rates(url, steps=args.steps)
            result["resume"] = resume_cost(url, steps=args.resume_steps)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
