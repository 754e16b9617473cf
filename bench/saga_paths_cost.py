"""What a saga's compensation away from its handler costs the statements that make it:
the reclaim (every tick runs it) and the cancel, before and after, for jobs that use no
undo. One database, the same rows: each round builds the rows, runs the statement of
`--before` (its text from that commit, on this schema, which only adds a column) and this
tree's in turn, each in a transaction rolled back, and times it. Cases:

- reclaim, nothing expired: the statement every tick runs (nearly always this one);
- reclaim, N expired plain jobs with attempts left, and N on their last attempt (the only
  ones the new statement looks up, each one probe of its steps);
- cancel of N queued plain jobs never claimed (none is looked up), and of N retrying ones
  (each claimed before, so each is looked up).

    .venv/bin/python -m bench.saga_paths_cost --before d439545 [--jobs 500] [--rounds 15]

Only ratios count (timings on a shared machine); medians over the rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg

from queue_core.migrate import migrate
from queue_core.postgres import statements as queries

from .hot_path_cost import ROOT
from .server import env_or_local_server, fresh_database

BEFORE = "d439545"


def statements(ref: str) -> dict[str, str]:
    text = subprocess.run(
        ["git", "show", f"{ref}:queue_core/sql/queries.sql"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return queries.parse(text, "queries.sql")


def expired(conn: psycopg.Connection[Any], n: int, *, last: bool) -> None:
    """n running plain jobs whose lease ended, on their last attempt or with attempts left."""
    conn.execute(
        "insert into tickq.jobs (id, queue, type, status, payload, attempts, max_attempts,"
        " lease_until, lease_token, started_at)"
        " select gen_random_uuid(), 'default', 'plain', 'running', '{}', %s, 3,"
        " now() - interval '1 second', gen_random_uuid(), now() from generate_series(1, %s)",
        (3 if last else 1, n),
    )


def waiting(conn: psycopg.Connection[Any], n: int, *, claimed: bool) -> list[Any]:
    """n plain jobs not running: retrying after a claim, or queued and never claimed."""
    rows = conn.execute(
        "insert into tickq.jobs (id, queue, type, status, payload, attempts, max_attempts,"
        " run_after) select gen_random_uuid(), 'default', 'plain', %s, '{}', %s, 3,"
        " now() + interval '1 minute' from generate_series(1, %s) returning id",
        ("retrying" if claimed else "queued", 1 if claimed else 0, n),
    ).fetchall()
    return [r[0] for r in rows]


def timed(
    conn: psycopg.Connection[Any], setup: Callable[[], dict[str, Any]], sql: str
) -> tuple[float, int]:
    """Seconds the statement took after `setup` made its rows (rolled back), and its rows."""
    with conn.transaction(force_rollback=True):
        params = setup()
        started = time.perf_counter()
        rows = conn.execute(sql, params).fetchall()
        return time.perf_counter() - started, len(rows)


def idle_reclaim(conn: psycopg.Connection[Any], old: str, new: str, runs: int) -> dict[str, Any]:
    """The reclaim as nearly every tick runs it (1,000 running jobs, no lease expired), the
    two statements alternating `runs` times each, prepared as the worker's are: median
    microseconds after the first tenth."""
    with conn.transaction(force_rollback=True):
        conn.execute(
            "insert into tickq.jobs (id, queue, type, status, payload, attempts, max_attempts,"
            " lease_until, lease_token, started_at) select gen_random_uuid(), 'default',"
            " 'plain', 'running', '{}', 1, 3, now() + interval '1 hour', gen_random_uuid(),"
            " now() from generate_series(1, 1000)"
        )
        times: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(runs):
            for side, sql in (("before", old), ("after", new)):
                started = time.perf_counter()
                conn.execute(sql, {"now": None, "limit": 100}, prepare=True).fetchall()
                times[side].append(time.perf_counter() - started)
    before, after = (statistics.median(t[runs // 10 :]) * 1e6 for t in times.values())
    ratio = round(after / before, 3)
    return {"before_us": round(before, 1), "after_us": round(after, 1), "ratio": ratio}


def measure(url: str, ref: str, jobs: int, rounds: int) -> dict[str, Any]:
    old, new = statements(ref), queries.QUERIES
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)

        def reclaim(n: int, last: bool) -> Callable[[], dict[str, Any]]:
            def setup() -> dict[str, Any]:
                if n:
                    expired(conn, n, last=last)
                return {"now": None, "limit": max(n, 1) * 2}

            return setup

        def cancel(claimed: bool) -> Callable[[], dict[str, Any]]:
            return lambda: {"now": None, "ids": waiting(conn, jobs, claimed=claimed)}

        cases = {
            "reclaim, nothing expired": ("jobs_reclaim", reclaim(0, False)),
            f"reclaim, {jobs} expired with attempts left": ("jobs_reclaim", reclaim(jobs, False)),
            f"reclaim, {jobs} expired on their last attempt": ("jobs_reclaim", reclaim(jobs, True)),
            f"cancel of {jobs} queued jobs never claimed": ("jobs_cancel", cancel(False)),
            f"cancel of {jobs} retrying jobs": ("jobs_cancel", cancel(True)),
        }
        out: dict[str, Any] = {
            "reclaim every tick (nothing expired), prepared": idle_reclaim(
                conn, old["jobs_reclaim"], new["jobs_reclaim"], 20 * rounds
            )
        }
        for case, (name, setup) in cases.items():
            times: dict[str, list[float]] = {"before": [], "after": []}
            counts: dict[str, set[int]] = {"before": set(), "after": set()}
            for _ in range(rounds):
                for side, sql in (("before", old[name]), ("after", new[name])):
                    seconds, count = timed(conn, setup, sql)
                    times[side].append(seconds)
                    counts[side].add(count)
            before = statistics.median(times["before"]) * 1000
            after = statistics.median(times["after"]) * 1000
            out[case] = {
                "before_ms": round(before, 3),
                "after_ms": round(after, 3),
                "ratio": round(after / before, 3),
                "rows": {side: sorted(c) for side, c in counts.items()},
            }
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.saga_paths_cost", description=__doc__)
    parser.add_argument("--before", default=BEFORE)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    with env_or_local_server() as admin, fresh_database(admin, "saga_paths") as url:
        result = measure(url, args.before, args.jobs, args.rounds)
    print(json.dumps({"before": args.before, **result}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
