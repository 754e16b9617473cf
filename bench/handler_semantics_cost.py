"""What batch and transactional handlers cost and save, and that plain jobs pay nothing.

Three comparisons, each a drain of a fresh backlog in a fresh process on a fresh database
of one server, taking turns round by round (medians reported, ratios within this run):

1. A batch handler (`batch_size=50`) against one call per job, for 10,000 jobs at claim
   batch 100: handler calls and wall time, with handlers that do nothing and with ones
   that wait 2 ms per call (an embeddings API's round trip, paid per call).
2. A plain drain (no-op handler, batch 10 and 100) by this tree's engine and by the engine
   at `--before` (`git archive`), so a cost the new options put on jobs that use neither
   shows as a ratio above 1.
3. A transactional handler (its row and the job's success in one transaction) against a
   plain handler writing the same row on the worker's own connection.
4. A transactional handler by the engine at `--before` and by this tree, with no event
   (what a type that opts into none pays) and with `events=["succeeded"]` (this tree).

Each case also runs once more, untimed, with every connection of the drain traced: its
round trips per job (the worker's and the handler connections' together) and the outbox
rows it wrote.

    python -m bench.handler_semantics_cost --before REF [--jobs 10000] [--rounds 3]
                              [--tables batch,plain,transactional,transactional-before]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .dependencies_cost import tree_at
from .server import env_or_local_server, fresh_database

ROOT = Path(__file__).resolve().parents[1]
API_SECONDS = 0.002  # what a handler call waits in the "2 ms per call" rows
HANDLER_BATCH = 50
CLAIM_BATCH = 100
TRIP_JOBS = 200  # jobs of each case's traced run


def child(kind: str, url: str, jobs: int, batch: int, traced: bool = False) -> dict[str, float]:
    """Drain `jobs` jobs of one handler kind with whichever engine is first on the path;
    the drain's wall seconds, handler calls and outbox rows, and `traced`, the round trips
    of every connection it used."""
    import psycopg

    from queue_core import PostgresStore, Registry, Runner
    from queue_core.migrate import migrate

    registry = Registry()
    calls = [0]
    wait = API_SECONDS if kind.endswith("-api") else 0.0
    traces = _trace_connections(psycopg) if traced else None

    def call() -> None:
        calls[0] += 1  # under the GIL; the rows compare counts, not races
        if wait:
            time.sleep(wait)

    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
        conn.execute("create table if not exists public.bench_rows (job_id uuid)")
        if kind.startswith("batch"):
            registry.task("work", batch_size=HANDLER_BATCH)(lambda b: call())
        elif kind.startswith("transactional"):

            def transactional(job: Any, tx: psycopg.Connection[Any]) -> None:
                call()
                tx.execute("insert into public.bench_rows values (%s)", (job.id,))

            events = ["succeeded"] if kind.endswith("-events") else []
            registry.task("work", transactional=True, events=events)(transactional)
        elif kind == "row":
            writer = psycopg.connect(url, autocommit=True)

            def row(job: Any) -> None:
                call()
                writer.execute("insert into public.bench_rows values (%s)", (job.id,))

            registry.task("work")(row)
        else:
            registry.task("work")(lambda job: call())
        store = PostgresStore(conn)
        store.enqueue_many([registry.spec("work", {"i": i}) for i in range(jobs)])
        with Runner(store, registry, batch_size=batch) as runner:
            if traces is not None:
                traces.mark()
            began = time.perf_counter()
            runner.tick()
            seconds = time.perf_counter() - began
            # Read while every connection is open: untracing flushes its trace.
            trips = None if traces is None else traces.round_trips()
        left = conn.execute("select count(*) from tickq.jobs where status <> 'succeeded'")
        assert left.fetchone() == (0,), "the drain left jobs behind"
        outbox = conn.execute("select count(*) from tickq.outbox").fetchone()
    found = {"seconds": seconds, "calls": calls[0], "events": outbox[0] if outbox else 0}
    return found if trips is None else {**found, "trips": trips}


class Traces:
    """libpq traces of a drain's connections, counted as round trips (bench/roundtrips.py
    counts one connection's the same way)."""

    def __init__(self) -> None:
        # Each traced connection, its trace file's descriptor, where the counted part begins.
        self.files: list[tuple[Any, int, int]] = []

    def add(self, conn: Any) -> None:
        fd, path = tempfile.mkstemp(prefix="tickq-trace-")
        os.unlink(path)  # the descriptor keeps it until the count
        _trace(conn, fd)
        self.files.append((conn, fd, 0))

    def mark(self) -> None:
        """Count only what comes after this (the drain, not the setup)."""
        marked = []
        for conn, fd, _ in self.files:
            conn.pgconn.untrace()  # flushes the trace so far
            marked.append((conn, fd, os.fstat(fd).st_size))
            _trace(conn, fd)
        self.files = marked

    def round_trips(self) -> int:
        """The server's ReadyForQuery messages on every traced connection since the mark,
        read while all are open (untracing flushes a trace)."""
        total = 0
        for conn, fd, start in self.files:
            conn.pgconn.untrace()
            os.lseek(fd, start, os.SEEK_SET)
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            total += sum(
                1
                for line in b"".join(chunks).decode(errors="replace").splitlines()
                if line.startswith("B\t") and "\tReadyForQuery" in line
            )
        return total


def _trace(conn: Any, fd: int) -> None:
    from psycopg import pq

    os.lseek(fd, 0, os.SEEK_END)
    conn.pgconn.trace(fd)
    conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)


def _trace_connections(psycopg: Any) -> Traces:
    """Trace every connection opened from now on (the handler connections too)."""
    traces = Traces()
    connect = psycopg.connect

    def traced(*args: Any, **kwargs: Any) -> Any:
        conn = connect(*args, **kwargs)
        traces.add(conn)
        return conn

    psycopg.connect = traced
    return traces


def run(
    admin_url: str, tree: Path, kind: str, jobs: int, batch: int, traced: bool = False
) -> dict[str, float]:
    code = (
        "import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[2]];"
        "from bench.handler_semantics_cost import child;"
        "print(json.dumps(child(sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]),"
        " sys.argv[7] == '1')))"
    )
    with fresh_database(admin_url, f"handlers_{kind.replace('-', '_')}") as url:
        args = [str(tree), str(ROOT), kind, url, str(jobs), str(batch), "1" if traced else "0"]
        out = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            check=True,
            cwd=tree,
            env={**os.environ, "PYTHONPATH": ""},
        )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# (row label, tree: "after" or "before", handler kind, jobs factor, claim batch)
Case = tuple[str, str, str, float, int]
# The keys of `cases`, in its order.
TABLES = ("batch", "plain", "transactional", "transactional-before")


def cases(before: str) -> list[tuple[str, list[Case]]]:
    """The tables: each row's cases, compared within the table to its first row."""
    return [
        (
            "batch handler against one call per job",
            [
                ("one call per job, no-op", "after", "plain", 1, CLAIM_BATCH),
                (f"batch_size={HANDLER_BATCH}, no-op", "after", "batch", 1, CLAIM_BATCH),
                ("one call per job, 2 ms per call", "after", "plain-api", 1, CLAIM_BATCH),
                (
                    f"batch_size={HANDLER_BATCH}, 2 ms per call",
                    "after",
                    "batch-api",
                    1,
                    CLAIM_BATCH,
                ),
            ],
        ),
        (
            "plain drain, before and after",
            [
                (f"batch 10 @{before}", "before", "plain", 0.5, 10),
                ("batch 10, this tree", "after", "plain", 0.5, 10),
                (f"batch 100 @{before}", "before", "plain", 1, 100),
                ("batch 100, this tree", "after", "plain", 1, 100),
            ],
        ),
        (
            "transactional against plain handler (each writes one row)",
            [
                ("plain handler, row on the worker's connection", "after", "row", 0.05, 10),
                ("transactional handler", "after", "transactional", 0.05, 10),
            ],
        ),
        (
            "transactional handler, before and after (each writes one row)",
            [
                (f"no event @{before}", "before", "transactional", 0.2, 10),
                ("no event, this tree", "after", "transactional", 0.2, 10),
                ('events=["succeeded"], this tree', "after", "transactional-events", 0.2, 10),
            ],
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.handler_semantics_cost")
    parser.add_argument("--before", required=True, help="the engine at this git ref beside")
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs of the batch rows")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (medians)")
    parser.add_argument(
        "--tables", default=",".join(TABLES), help="comma list of the tables to run"
    )
    args = parser.parse_args(argv)
    chosen = args.tables.split(",")
    tables = [t for key, t in zip(TABLES, cases(args.before), strict=True) if key in chosen]
    found: dict[str, list[dict[str, float]]] = {}
    with tree_at(args.before) as before_tree, env_or_local_server() as admin_url:
        trees = {"before": before_tree, "after": ROOT}
        for round_ in range(args.rounds):
            every = [case for _, rows in tables for case in rows]
            for label, side, kind, factor, batch in every if round_ % 2 == 0 else every[::-1]:
                jobs = int(args.jobs * factor)
                found.setdefault(label, []).append(run(admin_url, trees[side], kind, jobs, batch))
        traced = {
            label: run(admin_url, trees[side], kind, TRIP_JOBS, batch, traced=True)
            for _, rows in tables
            for label, side, kind, _, batch in rows
        }
    print(render(tables, found, traced, args.jobs, args.rounds))
    return 0


def render(
    tables: list[tuple[str, list[Case]]],
    found: dict[str, list[dict[str, float]]],
    traced: dict[str, dict[str, float]],
    jobs: int,
    rounds: int,
) -> str:
    lines = []
    for title, rows in tables:
        lines += [
            f"\n{title}",
            "",
            "| drain | jobs | handler calls | wall s | vs first row "
            f"| round trips / job ({TRIP_JOBS} jobs) | outbox rows / job |",
            "|---|---|---|---|---|---|---|",
        ]
        first = statistics.median(r["seconds"] for r in found[rows[0][0]])
        for label, _, _, factor, _ in rows:
            seconds = statistics.median(r["seconds"] for r in found[label])
            calls = int(statistics.median(r["calls"] for r in found[label]))
            trips = traced[label]["trips"] / TRIP_JOBS
            events = traced[label]["events"] / TRIP_JOBS
            lines.append(
                f"| {label} | {int(jobs * factor):,} | {calls:,} | {seconds:.2f} "
                f"| {seconds / first:.2f} | {trips:.2f} | {events:.2f} |"
            )
    lines.append(
        f"\nmedians of {rounds} rounds, one server, turns alternating by round; round trips "
        "of every connection of one more, traced drain per row"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
