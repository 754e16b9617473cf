"""What turns across tenants cost: a claim of 10 from a backlog shaped as one tenant (the
plain claim), 1,000 tenants of one group each, 10 tenants of 100 groups each and 2 of 100
groups each, plus an enqueue of plain jobs (the claim indexes changed), with this tree's
engine against another.

    python -m bench.tenant_claim_cost --before REF [--backlog 20000] [--samples 150]
                                      [--rounds 3]

Each side runs in a subprocess of its own (its queue_core first on the path) on a fresh
database; the sides take turns round by round, so each ratio compares like with like on a
shared machine. Claims are rolled back, so every sample claims from the same backlog. Figures
are medians of milliseconds of wall time and of the server's CPU (/proc/<pid>/schedstat of
the backend, so a superuser on this machine: TICKQ_DATABASE_URL or a throwaway server).
"""

from __future__ import annotations

import argparse
import statistics
import time

from .sides import alternate

# Group keys of each shape, by job number g: a tenant's groups are "<tenant>/<group>".
SHAPES = {
    "one tenant": "'solo'",
    "1,000 tenants x 1 group": "'t' || lpad((g %% 1000)::text, 4, '0')",
    "10 tenants x 100 groups": "'t' || (g %% 10) || '/g' || lpad((g / 10 %% 100)::text, 3, '0')",
    # Few tenants of many groups: a tenant's share (5 of 10) is locked in each group swept.
    "2 tenants x 100 groups": "'t' || (g %% 2) || '/g' || lpad((g / 2 %% 100)::text, 3, '0')",
}
ENQUEUE_BATCH = 500


def child(url: str, backlog: int, samples: int) -> dict[str, list[float]]:
    """Per shape: milliseconds of wall time and server CPU per claim of 10; and per plain job
    enqueued in batches of ENQUEUE_BATCH."""
    import psycopg

    from queue_core import PostgresStore
    from queue_core.migrate import migrate
    from queue_core.model.validation import job_spec

    found: dict[str, list[float]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
        pid = conn.info.backend_pid

        def server_ns() -> int:
            with open(f"/proc/{pid}/schedstat") as stat:
                return int(stat.read().split()[0])

        for shape, key in SHAPES.items():
            conn.execute("truncate tickq.jobs cascade")
            conn.execute(
                "insert into tickq.jobs (type, group_key, run_after, created_at)"
                f" select 'work', {key}, now() - interval '1 hour' + g * interval '1 ms',"
                "        now() - interval '1 hour' + g * interval '1 ms'"
                " from generate_series(1, %(backlog)s) g",
                {"backlog": backlog},
            )
            conn.execute("vacuum analyze tickq.jobs")
            store = PostgresStore(conn)
            walls, cpus = [], []
            for n in range(samples + 5):
                with conn.transaction(force_rollback=True):
                    began, began_cpu = time.perf_counter(), server_ns()
                    claimed = store.claim(limit=10)
                    wall, cpu = time.perf_counter() - began, server_ns() - began_cpu
                assert len(claimed) == 10, (shape, len(claimed))
                if n >= 5:  # the first claims plan the statements and probe the groups
                    walls.append(wall * 1e3)
                    cpus.append(cpu / 1e6)
            found[f"claim of 10, {shape}"] = [statistics.median(walls), statistics.median(cpus)]

        conn.execute("truncate tickq.jobs cascade")
        specs = [job_spec("work", payload={"i": i}) for i in range(ENQUEUE_BATCH)]
        store = PostgresStore(conn)
        store.enqueue_many(specs)
        walls, cpus = [], []
        for _ in range(20):
            began, began_cpu = time.perf_counter(), server_ns()
            store.enqueue_many(specs)
            walls.append((time.perf_counter() - began) * 1e3 / ENQUEUE_BATCH)
            cpus.append((server_ns() - began_cpu) / 1e6 / ENQUEUE_BATCH)
        found["enqueue, per plain job"] = [statistics.median(walls), statistics.median(cpus)]
    return found


def render(runs: dict[str, list[dict[str, list[float]]]], before: str) -> str:
    lines = [
        f"| operation | ms @{before} | ms | ratio | server CPU ms @{before} | server CPU ms "
        "| ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in runs["after"][0]:
        cells = []
        for index in (0, 1):
            old, new = (
                statistics.median(run[name][index] for run in runs[side])
                for side in ("before", "after")
            )
            cells += [f"{old:.3f}", f"{new:.3f}", f"{new / old:.2f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append(f"\nmedians of {len(runs['after'])} rounds, sides alternating")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tenant_claim_cost", description=__doc__)
    parser.add_argument("--before", required=True, help="the engine at this git ref beside")
    parser.add_argument("--backlog", type=int, default=20_000, help="runnable jobs per shape")
    parser.add_argument("--samples", type=int, default=150, help="claims per shape and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    runs = alternate(args.before, args.rounds, "tenant_claim_cost", args.backlog, args.samples)
    print(render(runs, args.before))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
