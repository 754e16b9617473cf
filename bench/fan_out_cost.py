"""What a big fan-out costs the batch that finishes it: a worker's batch holding one
tenant's parent of 100,000 waiting children and three jobs of another tenant, finished in
one statement, against the same batch whose parent has no children; with this tree's
engine against another.

    python -m bench.fan_out_cost --before REF [--children 100000] [--rounds 3]

Each side runs in a subprocess of its own (its queue_core first on the path) on a fresh
database, the sides taking turns round by round. The figure is the wall time of the
statement that persists the batch's four successes: the other tenant's three jobs finish
only when it commits.
"""

from __future__ import annotations

import argparse
import statistics
import time

from .sides import alternate


def child(url: str, children: int) -> dict[str, float]:
    """Milliseconds to finish the batch, with a parent of `children` children and of none."""
    import psycopg

    from queue_core import PostgresStore
    from queue_core.migrate import migrate
    from queue_core.model import transitions

    found: dict[str, float] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
        for fan in (0, children):
            conn.execute("truncate tickq.jobs cascade")
            parent = conn.execute(
                "insert into tickq.jobs (type, group_key, has_children, created_at)"
                " values ('parent', 'tenant-b', %s, now() - interval '1 hour') returning id",
                (fan > 0,),
            ).fetchone()[0]
            conn.execute(
                "insert into tickq.jobs (type, group_key, created_at)"
                " select 'other', 'tenant-a', now() - interval '1 hour' from generate_series(1, 3)"
            )
            conn.execute(
                "with c as (insert into tickq.jobs (type, group_key, status, pending_parents)"
                " select 'child', 'tenant-b', 'waiting', 1 from generate_series(1, %s)"
                " returning id)"
                " insert into tickq.job_dependencies (child_id, parent_id) select id, %s from c",
                (fan, parent),
            )
            # This tree counts an edge only if the enqueue did (as tickq's enqueue does here).
            conn.execute(
                "do $$ begin if exists (select from information_schema.columns"
                " where table_schema = 'tickq' and table_name = 'job_dependencies'"
                " and column_name = 'counted') then"
                " update tickq.job_dependencies set counted = true; end if; end $$"
            )
            conn.execute("vacuum analyze tickq.jobs")
            conn.execute("vacuum analyze tickq.job_dependencies")
            store = PostgresStore(conn)
            batch = store.claim(limit=4)
            assert len(batch) == 4, len(batch)
            outcomes = [transitions.succeeded(job, None) for job in batch]
            began = time.perf_counter()
            store.finish(outcomes)
            found[f"finish a batch, parent of {fan:,} children"] = (
                time.perf_counter() - began
            ) * 1e3
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fan_out_cost", description=__doc__)
    parser.add_argument("--before", required=True, help="the engine at this git ref beside")
    parser.add_argument("--children", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    runs = alternate(args.before, args.rounds, "fan_out_cost", args.children)
    print(f"| statement | ms @{args.before} | ms | ratio |\n|---|---|---|---|")
    for name in runs["after"][0]:
        old, new = (statistics.median(r[name] for r in runs[s]) for s in ("before", "after"))
        print(f"| {name} | {old:.1f} | {new:.1f} | {new / old:.2f} |")
    print(f"\nmedians of {args.rounds} rounds, sides alternating")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
