"""What dependencies cost: nothing for jobs without them, and a bounded amount per parent.

1. Plain jobs, before and after: the engine as it was just before dependencies were added
   (the parent of the commit that added migration 0009, extracted with `git archive`) and
   the engine of this tree each drain the same backlog of plain jobs on a fresh database,
   in subprocesses, the two sides taking turns run by run; medians and their ratio.
2. Release: 10,000 waiting children on 100 parents (100 each). Each parent's finish
   statement, which releases its children in its own transaction, is timed; so is a finish
   of a parent with no children, and the same with 1,000 children on 10 parents, so the time
   per parent is seen not to grow with the number of waiting jobs elsewhere (no scan).

    python -m bench.dependencies_cost [--runs 5] [--jobs 20000] [--before REF]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Any

import psycopg

import queue_core
from queue_core import PostgresStore, transitions

from .server import benchmark_server, fresh_database, server_description
from .systems import tickq_side

ROOT = Path(__file__).resolve().parents[1]
MIGRATION = "queue_core/migrations/0009_dependencies.sql"

# Runs in a subprocess whose PYTHONPATH is one side's tree, through the public API only.
DRAIN = """
import json, statistics, sys, time
import psycopg
import queue_core
from queue_core import PostgresStore, Registry, Runner
from queue_core.migrate import migrate

url, jobs, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
registry = Registry()
registry.task("noop")(lambda job: None)
with psycopg.connect(url, autocommit=True) as conn:
    migrate(conn)
    def fill(n):
        for first in range(0, n, 1000):
            queue_core.enqueue_many(conn, [{"type": "noop"}] * min(1000, n - first), using=registry)
    fill(jobs)
    store = PostgresStore(conn)
    claims = []
    for _ in range(50):  # claim alone, rolled back: the same backlog every time
        with conn.transaction(force_rollback=True):
            started = time.perf_counter()
            assert len(store.claim(limit=batch)) == batch
            claims.append(time.perf_counter() - started)
    with Runner(store, registry, batch_size=batch, concurrency=1) as runner:
        started = time.perf_counter()
        report = runner.tick()
        drain = time.perf_counter() - started
    assert report.succeeded == jobs, report
print(json.dumps({"drain_seconds": drain, "claim_seconds": statistics.median(claims)}))
"""


def before_commit() -> str:
    """The commit just before dependencies: parent of the one that added migration 0009."""
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", MIGRATION],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not added:
        raise SystemExit(f"no commit adds {MIGRATION}; pass --before")
    return f"{added[-1]}^"


@contextlib.contextmanager
def tree_at(ref: str) -> Iterator[Path]:
    """queue_core as it was at `ref`, in a temporary directory."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref, "queue_core"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="tickq-before-") as tmp:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        yield Path(tmp)


def drain_once(admin_url: str, tree: Path, side: str, jobs: int, batch: int) -> dict[str, float]:
    with fresh_database(admin_url, f"deps_{side}") as url:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        done = subprocess.run(
            [sys.executable, "-c", DRAIN, url, str(jobs), str(batch)],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"{side} drain failed:\n{done.stderr}")
        result: dict[str, float] = json.loads(done.stdout)
        return result


def plain_jobs(admin_url: str, ref: str, runs: int, jobs: int, batch: int) -> dict[str, Any]:
    samples: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    with tree_at(ref) as before:
        trees = {"before": before, "after": ROOT}
        for run in range(runs):
            for side in ("before", "after") if run % 2 == 0 else ("after", "before"):
                samples[side].append(drain_once(admin_url, trees[side], side, jobs, batch))
    out: dict[str, Any] = {"before": ref, "jobs": jobs, "batch": batch, "runs": runs}
    for metric in ("drain_seconds", "claim_seconds"):
        medians = {side: statistics.median(s[metric] for s in samples[side]) for side in samples}
        out[metric] = medians
        out[f"{metric}_ratio_after_over_before"] = medians["after"] / medians["before"]
    out["drain_jobs_per_second"] = {side: jobs / out["drain_seconds"][side] for side in samples}
    return out


def release(admin_url: str, parents: int, children_each: int) -> dict[str, Any]:
    """Seconds per parent finish that releases `children_each` waiting children."""
    with fresh_database(admin_url, "deps_release") as url:
        tickq_side.install(url)
        with psycopg.connect(url, autocommit=True) as conn:
            store = PostgresStore(conn)
            ids = [queue_core.enqueue(conn, "parent").id for _ in range(parents)]
            lonely = queue_core.enqueue(conn, "parent").id
            for parent in ids:
                requests = [{"type": "child", "after": [parent]}] * children_each
                queue_core.enqueue_many(conn, requests)
            conn.execute("analyze tickq.jobs; analyze tickq.job_dependencies")
            plan = explain_children(conn, ids[0])
            claimed = {job.id: job for job in store.claim(limit=parents + 1)}
            assert set(claimed) == {*ids, lonely}
            alone = finish_seconds(store, claimed[lonely])
            per_parent = [finish_seconds(store, claimed[parent]) for parent in ids]
            waiting = conn.execute(
                "select count(*) from tickq.jobs where status = 'waiting'"
            ).fetchone()
            queued = conn.execute(
                "select count(*) from tickq.jobs where type = 'child' and status = 'queued'"
            ).fetchone()
    assert waiting == (0,) and queued == (parents * children_each,)
    median = statistics.median(per_parent)
    return {
        "parents": parents,
        "children_per_parent": children_each,
        "waiting_children": parents * children_each,
        "finish_without_children_seconds": alone,
        "finish_releasing_children_seconds_median": median,
        "finish_releasing_children_seconds_max": max(per_parent),
        "seconds_per_released_child": median / children_each,
        "children_lookup_plan": plan,
    }


def finish_seconds(store: PostgresStore, job: queue_core.Job) -> float:
    started = time.perf_counter()
    store.finish([transitions.succeeded(job, None)])
    return time.perf_counter() - started


def explain_children(conn: psycopg.Connection[Any], parent: Any) -> list[str]:
    """How tickq.jobs_settle finds a parent's children (its lookup, explained on its own)."""
    rows = conn.execute(
        "explain select child_id, count(*) from tickq.job_dependencies"
        " where parent_id = any(%s::uuid[]) group by child_id",
        ([parent],),
    ).fetchall()
    return [row[0] for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dependencies_cost")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--before", help="git ref of the engine before (default: see above)")
    parser.add_argument("--database-url", help="superuser URL (default: a throwaway server)")
    args = parser.parse_args()
    ref = args.before or before_commit()
    with benchmark_server(args.database_url) as admin_url:
        result = {
            "server": server_description(admin_url),
            "plain_jobs": plain_jobs(admin_url, ref, args.runs, args.jobs, args.batch),
            "release_10k_on_100": release(admin_url, parents=100, children_each=100),
            "release_1k_on_10": release(admin_url, parents=10, children_each=100),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
