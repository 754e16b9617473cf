"""What flow keys cost: a drain with no flow limits against another ref's engine (round trips
per job and jobs per second: jobs without keys should pay nothing), and a drain of jobs
spread over many keys with a cap per key against the same drain with no flow limit.

    python -m bench.flow_cost --before REF [--jobs 4000] [--rounds 3]
                              [--keyed-jobs 10000] [--keys 1000] [--cap 2] [--claimers 4]

The first part runs each side in a subprocess of its own (its queue_core first on the path)
on a fresh database, the sides taking turns round by round: one claimer drains a backlog of
plain jobs in batches of 10, finishing each batch in the next claim's statement, its round
trips counted from libpq's trace, its backend's CPU from /proc (so a superuser on this
machine: TICKQ_DATABASE_URL or a throwaway server). The second part runs this tree alone:
`--claimers` threads drain `--keyed-jobs` jobs, each of one key of `--keys`, with `flow set
k: --max-running CAP` and without, the two taking turns round by round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from typing import Any

from .roundtrips import count_round_trips
from .server import env_or_local_server, fresh_database
from .sides import alternate


def child(url: str, jobs: int) -> dict[str, float]:
    """One plain drain on this process's engine: jobs per second and round trips per job."""
    import psycopg

    from queue_core import PostgresStore
    from queue_core.migrate import migrate
    from queue_core.model.validation import job_spec

    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
        store = PostgresStore(conn)
        store.enqueue_many([job_spec("work", {"i": i}) for i in range(jobs)])
        conn.execute("vacuum analyze tickq.jobs")
        store.limits_configured()  # the one-off lookup is not part of the measurement
        pid = conn.info.backend_pid

        def server_ns() -> int:
            with open(f"/proc/{pid}/schedstat") as stat:
                return int(stat.read().split()[0])

        done = 0
        with count_round_trips(conn) as trips:
            began, began_cpu = time.perf_counter(), server_ns()
            outcomes: list[Any] = []
            while True:
                _, batch = store.finish_and_claim(outcomes, limit=10)
                if not batch:
                    break
                done += len(batch)
                outcomes = [_succeeded(job) for job in batch]
            seconds, cpu = time.perf_counter() - began, server_ns() - began_cpu
    assert done == jobs, (done, jobs)
    return {
        "jobs_per_s": jobs / seconds,
        "round_trips_per_job": trips.count / jobs,
        "server_cpu_us_per_job": cpu / 1e3 / jobs,
    }


def _succeeded(job: Any) -> Any:
    from queue_core.model import transitions

    return transitions.succeeded(job, None)


def keyed_drain(url: str, jobs: int, keys: int, cap: int | None, claimers: int) -> float:
    """Jobs per second of `claimers` threads draining `jobs` jobs over `keys` keys."""
    import psycopg

    from queue_core import PostgresStore
    from queue_core.model import transitions
    from queue_core.model.flow import flow_limit
    from queue_core.model.validation import job_spec
    from queue_core.policies.flow_limits import FlowLimits

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("truncate tickq.jobs, tickq.flow_limits, tickq.flow_starts cascade")
        if cap is not None:
            FlowLimits(conn).set(flow_limit("k:", max_running=cap))
        specs = [job_spec("work", {"i": i}, flow_keys=[f"k:{i % keys}"]) for i in range(jobs)]
        PostgresStore(conn).enqueue_many(specs)
        conn.execute("vacuum analyze tickq.jobs")
    counts = [0] * claimers
    start = threading.Barrier(claimers + 1)

    def claim_loop(slot: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            store = PostgresStore(conn)
            store.limits_configured()
            start.wait()
            idle = 0
            while idle < 20:  # a claim may find every key of its candidates held by others
                batch = store.claim(limit=10)
                if not batch:
                    idle += 1
                    continue
                idle = 0
                store.finish([transitions.succeeded(job, None) for job in batch])
                counts[slot] += len(batch)

    threads = [threading.Thread(target=claim_loop, args=(i,)) for i in range(claimers)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    assert sum(counts) == jobs, (sum(counts), jobs)
    return jobs / seconds


def claim_cpu(url: str, keys: int, backlog: int, samples: int) -> list[float]:
    """Milliseconds of wall time and of server CPU per claim of 10 from `backlog` runnable
    jobs over `keys` keys under a cap per key (median; claims rolled back, so every sample
    claims from the same backlog)."""
    import psycopg

    from queue_core import PostgresStore
    from queue_core.model.flow import flow_limit
    from queue_core.policies.flow_limits import FlowLimits

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("truncate tickq.jobs, tickq.flow_limits, tickq.flow_starts cascade")
        FlowLimits(conn).set(flow_limit("k:", max_running=2))
        conn.execute(
            "insert into tickq.jobs (type, flow_keys, run_after, created_at)"
            " select 'work', array['k:' || (g %% %(keys)s)],"
            "        now() - interval '1 hour' + g * interval '1 ms',"
            "        now() - interval '1 hour' + g * interval '1 ms'"
            " from generate_series(1, %(backlog)s) g",
            {"keys": keys, "backlog": backlog},
        )
        conn.execute("vacuum analyze tickq.jobs")
        pid = conn.info.backend_pid
        store = PostgresStore(conn)
        walls, cpus = [], []
        for n in range(samples + 5):
            with conn.transaction(force_rollback=True):
                with open(f"/proc/{pid}/schedstat") as stat:
                    began_cpu = int(stat.read().split()[0])
                began = time.perf_counter()
                claimed = store.claim(limit=10)
                wall = time.perf_counter() - began
                with open(f"/proc/{pid}/schedstat") as stat:
                    cpu = int(stat.read().split()[0]) - began_cpu
            assert len(claimed) == 10, (keys, len(claimed))
            if n >= 5:  # the first claims plan the statements
                walls.append(wall * 1e3)
                cpus.append(cpu / 1e6)
    return [round(statistics.median(walls), 3), round(statistics.median(cpus), 3)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.flow_cost", description=__doc__)
    parser.add_argument("--before", required=True, help="the engine at this git ref beside")
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keyed-jobs", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--cap", type=int, default=2)
    parser.add_argument("--claimers", type=int, default=4)
    args = parser.parse_args(argv)

    runs = alternate(args.before, args.rounds, "flow_cost", args.jobs)
    result: dict[str, Any] = {"plain drain without flow limits": {}}
    for side in ("before", "after"):
        result["plain drain without flow limits"][side] = {
            name: round(statistics.median(run[name] for run in runs[side]), 3)
            for name in ("jobs_per_s", "round_trips_per_job", "server_cpu_us_per_job")
        }
    before, after = (result["plain drain without flow limits"][s] for s in ("before", "after"))
    result["plain drain without flow limits"]["jobs/s ratio (after / before)"] = round(
        after["jobs_per_s"] / before["jobs_per_s"], 3
    )
    result["plain drain without flow limits"]["server CPU ratio (after / before)"] = round(
        after["server_cpu_us_per_job"] / before["server_cpu_us_per_job"], 3
    )

    from queue_core.migrate import migrate

    capped: list[float] = []
    free: list[float] = []
    with env_or_local_server() as admin, fresh_database(admin, "flow") as url:
        import psycopg

        with psycopg.connect(url) as conn:
            migrate(conn)
        shape = (args.keyed_jobs, args.keys)
        for _ in range(args.rounds):
            free.append(keyed_drain(url, *shape, None, args.claimers))
            capped.append(keyed_drain(url, *shape, args.cap, args.claimers))
        cpu = {f"{keys} keys": claim_cpu(url, keys, 20_000, 100) for keys in (10, 1000, 100_000)}
    result[f"{args.keyed_jobs} jobs over {args.keys} keys, {args.claimers} claimers"] = {
        "no flow limit, jobs/s": [round(x) for x in free],
        f"cap {args.cap} per key, jobs/s": [round(x) for x in capped],
        "ratio (capped / free), medians": round(
            statistics.median(capped) / statistics.median(free), 3
        ),
    }
    result["claim of 10 under a cap per key, from 20,000 jobs: [ms, server CPU ms]"] = cpu
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
