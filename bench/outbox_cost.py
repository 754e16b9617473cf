"""What the outbox costs a drain of types that opt into no event: the same engine, the same
database, with and without the outbox's parts of the hot path (the `Job Dead` trigger's
condition on every finished row, the finish's CTE of opted-in events), rounds alternating.

The "without" side disables the trigger jobs_outbox_dead and runs the finish statements with
the events CTE cut out; everything else is this tree. A backlog of no-op jobs is drained at
batch 10 and 100; the median per job of each side, and the ratio.

    python -m bench.outbox_cost [--jobs 5000] [--rounds 6]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time

import psycopg

from queue_core import PostgresStore, Registry, Runner, enqueue_many
from queue_core.migrate import migrate
from queue_core.postgres import statements as queries

from .server import env_or_local_server, fresh_database

BATCHES = (10, 100)
_EVENTS_CTE = re.compile(
    r", evented as \(.*?where o\.event is not null and o\.id in \(select id from finished\)\s*\)",
    re.S,
)


def without_outbox() -> dict[str, str]:
    """The finish statements with the events CTE and the outcome's event column cut out."""
    cut = {}
    for name, sql in queries.QUERIES.items():
        if "evented as (" in sql:
            stripped = _EVENTS_CTE.sub("", sql).replace(", event jsonb)", ")")
            stripped = stripped.replace(
                "null, null, null, null, null\n", "null, null, null, null\n"
            )
            if stripped == sql or "evented" in stripped:
                raise RuntimeError(f"could not cut the outbox out of {name}")
            cut[name] = stripped
    return cut


def drain(conn: psycopg.Connection, registry: Registry, jobs: int, batch: int) -> float:
    conn.execute("truncate tickq.jobs")
    for _ in range(jobs // 100):
        enqueue_many(conn, [{"type": "noop"}] * 100, using=registry)
    with Runner(PostgresStore(conn), registry, batch_size=batch, concurrency=1) as runner:
        began = time.perf_counter()
        report = runner.tick()
        took = time.perf_counter() - began
    assert report.succeeded == jobs, report
    return took / jobs * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.outbox_cost", description=__doc__)
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per drain (x100)")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    registry = Registry()
    registry.task("noop")(lambda job: None)
    with_ = dict(queries.QUERIES)
    cut = without_outbox()
    found: dict[tuple[str, int], list[float]] = {}
    with (
        env_or_local_server() as admin,
        fresh_database(admin, "outbox") as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        migrate(conn)
        for round_ in range(args.rounds):
            sides = ("with", "without") if round_ % 2 == 0 else ("without", "with")
            for batch in BATCHES:
                for side in sides:
                    queries.QUERIES.update(with_ if side == "with" else cut)
                    state = "enable" if side == "with" else "disable"
                    conn.execute(f"alter table tickq.jobs {state} trigger jobs_outbox_dead")
                    found.setdefault((side, batch), []).append(
                        drain(conn, registry, args.jobs, batch)
                    )
        queries.QUERIES.update(with_)
    print("| drain, µs per job | without the outbox | with it | ratio |")
    print("|---|---|---|---|")
    for batch in BATCHES:
        off = statistics.median(found[("without", batch)])
        on = statistics.median(found[("with", batch)])
        print(f"| batch {batch} | {off:.1f} | {on:.1f} | {on / off:.3f} |")
    print(f"\nmedians of {args.rounds} rounds of {args.jobs} jobs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
