"""What durable workflows cost: nothing for jobs that use none of it, and for a map of
1,000 children the parent's enqueue (one statement) and its resume (one read of the
children's results, stored as its step).

1. Plain drain, before and after: the engine at `--before` (main before workflows) and
   this tree drain the same backlog of no-op jobs, each in its own process and database on
   one server, rounds alternating (bench.steps_cost's drain), so only the ratio counts.
2. Map: a parent maps `--children` no-op children (max_concurrency as given). Timed: the
   tick that runs the parent up to its suspension (claim, the one statement enqueuing the
   children and suspending it), the drain of the children (each finish counting the parent
   down, releasing the next waiting sibling), and the tick that resumes the parent (claim,
   load, the children's results read in order and stored).

    .venv/bin/python -m bench.workflows_cost --before b867c47 [--children 1000]

Uses TICKQ_DATABASE_URL (a superuser able to create databases) or a throwaway durable
local server (fsync on, as in production).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import psycopg

from queue_core import JobContext, PostgresStore, Registry, Runner, TickReport
from queue_core.migrate import migrate

from .server import benchmark_server, fresh_database
from .steps_cost import plain_drain

BEFORE = "b867c47"


def map_cost(url: str, *, children: int, window: int | None) -> dict[str, Any]:
    registry = Registry()

    @registry.task("fan-out", lease_seconds=600)
    def fan_out(job: JobContext) -> int:
        payloads = [{"i": i} for i in range(children)]
        return len(job.map("chunks", "chunk", payloads, max_concurrency=window))

    registry.task("chunk")(lambda job: job.payload["i"])

    with psycopg.connect(url, autocommit=True) as conn:
        store = PostgresStore(conn)
        parent = store.enqueue(registry.spec("fan-out", {})).id
        with Runner(store, registry, batch_size=100, concurrency=1) as runner:
            began = time.perf_counter()
            runner.run_batch(TickReport())
            enqueue = time.perf_counter() - began
            assert store.get(parent).status.value == "queued"
            began = time.perf_counter()
            drained = 0
            while True:
                claimed = runner.run_batch(TickReport())
                if not claimed or store.get(parent).run_after <= store.now():
                    break
                drained += claimed
            drain = time.perf_counter() - began
            began = time.perf_counter()
            runner.run_batch(TickReport())
            resume = time.perf_counter() - began
            job = store.get(parent)
            assert job.status.value == "succeeded" and job.result == children, job
    return {
        "children": children,
        "max_concurrency": window,
        "enqueue_seconds": round(enqueue, 4),
        "children_drain_seconds": round(drain, 3),
        "children_per_s": round(children / drain),
        "resume_seconds": round(resume, 4),
        "note": "enqueue: the parent's run up to its suspension; resume: the woken parent's "
        "run, reading the children's results and storing them",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3000, help="backlog per plain drain")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--children", type=int, default=1000)
    parser.add_argument("--max-concurrency", type=int, default=None)
    parser.add_argument("--before", default=BEFORE, help="git ref of the engine before")
    args = parser.parse_args(argv)
    with benchmark_server(os.environ.get("TICKQ_DATABASE_URL")) as admin:
        result: dict[str, Any] = {
            "plain_drain": plain_drain(admin, jobs=args.jobs, rounds=args.rounds, ref=args.before)
        }
        with fresh_database(admin, "workflows") as url:
            with psycopg.connect(url) as conn:
                migrate(conn)
            result["map"] = map_cost(url, children=args.children, window=args.max_concurrency)
            result["map_windowed"] = map_cost(url, children=args.children, window=20)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
