"""What dependencies cost: nothing for jobs without them, and a bounded amount per parent.

1. Plain jobs, before and after: the engine as it was just before dependencies were added
   (the parent of the commit that added migration 0009, extracted with `git archive`) and
   the engine of this tree, each in a subprocess on a fresh database, take turns sample by
   sample: a claim of a batch beside a standing backlog, and a tick that drains a batch of
   fresh plain jobs. Medians and their ratio.
2. Release: 10,000 waiting children on 100 parents (100 each). Each parent's finish
   statement, which releases its children in its own transaction, is timed; so is a finish
   of a parent with no children, and the same with 1,000 children on 10 parents, so the time
   per parent is seen not to grow with the number of waiting jobs elsewhere (no scan).

    python -m bench.dependencies_cost [--drains 10] [--claims 200] [--jobs 5000] [--before REF]
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
from queue_core import PostgresStore
from queue_core.model import transitions

from .server import benchmark_server, fresh_database, server_description
from .systems import tickq_side

ROOT = Path(__file__).resolve().parents[1]
MIGRATION = "queue_core/migrations/0009_dependencies.sql"

# Runs in a subprocess whose PYTHONPATH is one side's tree, through the public API only.
# It answers commands on stdin, one line each, with the seconds the operation took:
# "claim" (one claim of a batch, rolled back, on a standing backlog) and "drain N" (enqueue
# N plain jobs, then one tick that runs them all).
SIDE = """
import sys, time
import psycopg
import queue_core
from queue_core import PostgresStore, Registry, Runner
from queue_core.migrate import migrate

url, backlog, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
registry = Registry()
registry.task("noop")(lambda job: None)
conn = psycopg.connect(url, autocommit=True)
migrate(conn)
store = PostgresStore(conn)

def enqueue(n, queue):
    for first in range(0, n, 1000):
        size = min(1000, n - first)
        queue_core.enqueue_many(conn, [{"type": "noop", "queue": queue}] * size, using=registry)

enqueue(backlog, "standing")
claimer = Runner(store, registry, queues=["standing"], batch_size=batch)
drainer = Runner(store, registry, queues=["drain"], batch_size=batch, concurrency=1)
print("ready", flush=True)
for line in sys.stdin:
    command, *args = line.split()
    if command == "claim":
        with conn.transaction(force_rollback=True):
            started = time.perf_counter()
            claimed = store.claim(queues=["standing"], limit=batch)
            seconds = time.perf_counter() - started
        assert len(claimed) == batch
    else:
        n = int(args[0])
        enqueue(n, "drain")
        started = time.perf_counter()
        report = drainer.tick()
        seconds = time.perf_counter() - started
        assert report.succeeded == n, report
    print(seconds, flush=True)
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


class Side:
    """One engine in a subprocess of its own, on a fresh database, answering commands."""

    def __init__(self, admin_url: str, tree: Path, name: str, backlog: int, batch: int) -> None:
        self.database = fresh_database(admin_url, f"deps_{name}")
        url = self.database.__enter__()
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.process = subprocess.Popen(
            [sys.executable, "-c", SIDE, url, str(backlog), str(batch)],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if self._line() != "ready":
            raise RuntimeError(f"the {name} side did not start")

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line:
            raise RuntimeError(f"the side exited with {self.process.wait()}")
        return line

    def seconds(self, command: str) -> float:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return float(self._line())

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)
        self.database.__exit__(None, None, None)


def plain_jobs(
    admin_url: str, ref: str, rounds: int, jobs: int, batch: int, claims: int
) -> dict[str, Any]:
    """Both engines alive at once, taking turns command by command (who goes first swaps),
    so both see the same machine load and the ratio is about the engines."""
    samples: dict[str, dict[str, list[float]]] = {
        side: {"claim": [], "drain": []} for side in ("before", "after")
    }
    with tree_at(ref) as before, contextlib.ExitStack() as stack:
        sides = {}
        for name, tree in (("before", before), ("after", ROOT)):
            sides[name] = Side(admin_url, tree, name, jobs, batch)
            stack.callback(sides[name].close)
        order = ["before", "after"]
        for turn in range(claims):
            for name in order if turn % 2 else order[::-1]:
                samples[name]["claim"].append(sides[name].seconds("claim"))
        for turn in range(rounds):
            for name in order if turn % 2 else order[::-1]:
                samples[name]["drain"].append(sides[name].seconds(f"drain {jobs}"))
    out: dict[str, Any] = {
        "before": ref,
        "jobs_per_drain": jobs,
        "batch": batch,
        "drains": rounds,
        "claims": claims,
        "standing_backlog": jobs,
    }
    for metric in ("claim", "drain"):
        medians = {name: statistics.median(s[metric]) for name, s in samples.items()}
        out[f"{metric}_seconds"] = medians
        out[f"{metric}_ratio_after_over_before"] = medians["after"] / medians["before"]
    out["drain_jobs_per_second"] = {
        name: jobs / out["drain_seconds"][name] for name in ("before", "after")
    }
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
    parser.add_argument("--drains", type=int, default=10, help="drains per side, alternating")
    parser.add_argument("--claims", type=int, default=200, help="claims per side, alternating")
    parser.add_argument("--jobs", type=int, default=5_000, help="jobs per drain and backlog")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--before", help="git ref of the engine before (default: see above)")
    parser.add_argument("--database-url", help="superuser URL (default: a throwaway server)")
    args = parser.parse_args()
    ref = args.before or before_commit()
    with benchmark_server(args.database_url) as admin_url:
        result = {
            "server": server_description(admin_url),
            "plain_jobs": plain_jobs(
                admin_url, ref, args.drains, args.jobs, args.batch, args.claims
            ),
            "release_10k_on_100": release(admin_url, parents=100, children_each=100),
            "release_1k_on_10": release(admin_url, parents=10, children_each=100),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
