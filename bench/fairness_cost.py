"""What fairness costs: the fair claim against today's plain claim, the drain with fairness
against the drain without, and enqueue with the fair claim's index against without it.

    .venv/bin/python -m bench.fairness_cost [--backlog 50000] [--samples 200] [--drain 20000]

Everything runs in one process on one server, the variants taking turns sample by sample
(claims) or round by round (drains, enqueues), so each ratio compares like with like on a
shared, noisy machine. Besides wall time, each figure is also given in CPU time (this
process plus the server backends serving it, from /proc/<pid>/schedstat), which a loaded
machine disturbs far less than wall time. Uses TICKQ_DATABASE_URL (a superuser on this
machine, for the CPU figures) or a throwaway durable server.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from queue_core import PostgresStore
from queue_core.migrate import migrate
from queue_core.model import transitions
from queue_core.model.validation import job_spec

from .server import benchmark_server, fresh_database

GROUP_COUNTS = (1, 10, 1000)


def backend_cpu(conn: psycopg.Connection[Any]) -> int:
    """Nanoseconds of CPU the server process behind `conn` has used so far."""
    pid = conn.info.backend_pid
    with open(f"/proc/{pid}/schedstat") as stat:
        return int(stat.read().split()[0])


class PlainStore(PostgresStore):
    """Today's claim whatever the groups: the baseline."""

    def _claims_fairly(self, queues: Sequence[str]) -> bool:
        return False


class FairStore(PostgresStore):
    """The fair claim whatever the groups (the store itself picks it only for 2+ groups)."""

    def _claims_fairly(self, queues: Sequence[str]) -> bool:
        return True


def fill(conn: psycopg.Connection[Any], jobs: int, groups: int) -> None:
    """`jobs` runnable jobs spread evenly over `groups` groups, oldest first."""
    conn.execute("truncate tickq.jobs cascade")
    conn.execute(
        "insert into tickq.jobs (type, group_key, run_after, created_at)"
        " select 'work', 'tenant-' || (g %% %(groups)s),"
        "        now() - interval '1 hour' + g * interval '1 ms',"
        "        now() - interval '1 hour' + g * interval '1 ms'"
        " from generate_series(1, %(jobs)s) g",
        {"jobs": jobs, "groups": groups},
    )
    conn.execute("vacuum analyze tickq.jobs")


def claim_costs(url: str, *, backlog: int, samples: int, batch: int) -> dict[str, Any]:
    """Milliseconds per claim of `batch` from `backlog` runnable jobs, each rolled back."""
    out: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        stores: dict[str, PostgresStore] = {
            "plain": PlainStore(conn),
            "fair": FairStore(conn),
            "auto": PostgresStore(conn),
        }
        for groups in GROUP_COUNTS:
            fill(conn, backlog, groups)
            times: dict[str, list[float]] = {name: [] for name in stores}
            cpu: dict[str, int] = dict.fromkeys(stores, 0)
            names = list(stores)
            for sample in range(samples + 10):
                for name in names if sample % 2 else reversed(names):
                    with conn.transaction(force_rollback=True):
                        server = backend_cpu(conn)
                        client = time.thread_time_ns()
                        began = time.perf_counter()
                        claimed = stores[name].claim(limit=batch)
                        elapsed = time.perf_counter() - began
                        spent = time.thread_time_ns() - client + backend_cpu(conn) - server
                    assert len(claimed) == batch, (name, len(claimed))
                    if sample >= 10:  # the first samples warm plans and caches
                        times[name].append(elapsed)
                        cpu[name] += spent
            medians = {name: statistics.median(t) for name, t in times.items()}
            out[f"{groups}_groups"] = {
                **{f"{name}_ms": round(m * 1e3, 3) for name, m in medians.items()},
                **{f"{name}_cpu_ms": round(c / samples / 1e6, 3) for name, c in cpu.items()},
                "fair_over_plain": round(medians["fair"] / medians["plain"], 3),
                "auto_over_plain": round(medians["auto"] / medians["plain"], 3),
                "fair_over_plain_cpu": round(cpu["fair"] / cpu["plain"], 3),
                "auto_over_plain_cpu": round(cpu["auto"] / cpu["plain"], 3),
            }
    return out


def drain(
    url: str, make: Callable[[psycopg.Connection[Any]], PostgresStore], claimers: int, batch: int
) -> tuple[int, float, int]:
    """Claim and finish until nothing is left, as the runner does (outcomes ride on the next
    claim); returns (jobs, seconds, CPU nanoseconds of the claimers and their backends)."""
    counts = [0] * claimers
    cpu = [0] * claimers
    start = threading.Barrier(claimers + 1)

    def loop(slot: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            store = make(conn)
            store.limits_configured()
            start.wait()
            server, client = backend_cpu(conn), time.thread_time_ns()
            outcomes: list[Any] = []
            while True:
                _, jobs = store.finish_and_claim(outcomes, limit=batch)
                if not jobs:
                    break
                outcomes = [transitions.succeeded(job, None) for job in jobs]
                counts[slot] += len(jobs)
            cpu[slot] = time.thread_time_ns() - client + backend_cpu(conn) - server

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(claimers)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return sum(counts), time.perf_counter() - began, sum(cpu)


def drains(url: str, *, jobs: int, claimers: int, batch: int, rounds: int) -> dict[str, Any]:
    """Jobs per second draining `jobs` over 1000 groups (fair vs plain) and over one group
    (what the store picks, plain with its probe, vs plain)."""
    variants: dict[str, tuple[int, Callable[[psycopg.Connection[Any]], PostgresStore]]] = {
        "1000_groups_fair": (1000, PostgresStore),
        "1000_groups_plain": (1000, PlainStore),
        "1_group_auto": (1, PostgresStore),
        "1_group_plain": (1, PlainStore),
    }
    rates: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(rounds):
        names = list(variants) if round_ % 2 else list(reversed(variants))
        for name in names:
            groups, make = variants[name]
            with psycopg.connect(url, autocommit=True) as conn:
                fill(conn, jobs, groups)
            done, seconds, spent = drain(url, make, claimers, batch)
            assert done == jobs, (name, done)
            rates[name].append(done / seconds)
            cpu[name].append(spent / done / 1e3)
    med = {name: statistics.median(r) for name, r in rates.items()}
    per_job = {name: statistics.median(c) for name, c in cpu.items()}
    return {
        "jobs": jobs,
        "claimers": claimers,
        "batch": batch,
        "rounds": rounds,
        **{f"{name}_jobs_per_s": [round(r) for r in rs] for name, rs in rates.items()},
        **{f"{name}_cpu_us_per_job": [round(c, 1) for c in cs] for name, cs in cpu.items()},
        "fair_over_plain_1000_groups": round(med["1000_groups_fair"] / med["1000_groups_plain"], 3),
        "auto_over_plain_1_group": round(med["1_group_auto"] / med["1_group_plain"], 3),
        "fair_over_plain_1000_groups_cpu": round(
            per_job["1000_groups_fair"] / per_job["1000_groups_plain"], 3
        ),
        "auto_over_plain_1_group_cpu": round(per_job["1_group_auto"] / per_job["1_group_plain"], 3),
    }


def enqueues(with_index: str, without_index: str, *, jobs: int, rounds: int) -> dict[str, Any]:
    """Jobs per second of enqueue_many (batches of 500) with and without jobs_fair_idx."""
    urls = {"with_fair_index": with_index, "without_fair_index": without_index}
    rates: dict[str, list[float]] = {name: [] for name in urls}
    cpu: dict[str, list[float]] = {name: [] for name in urls}
    specs = [job_spec("work", {"i": i}) for i in range(500)]
    for round_ in range(rounds):
        for name in list(urls) if round_ % 2 else list(reversed(urls)):
            with psycopg.connect(urls[name], autocommit=True) as conn:
                conn.execute("truncate tickq.jobs cascade")
                store = PostgresStore(conn)
                store.limits_configured()
                server, client = backend_cpu(conn), time.thread_time_ns()
                began = time.perf_counter()
                for _ in range(jobs // len(specs)):
                    store.enqueue_many(specs)
                rates[name].append(jobs / (time.perf_counter() - began))
                spent = time.thread_time_ns() - client + backend_cpu(conn) - server
                cpu[name].append(spent / jobs / 1e3)
    med = {name: statistics.median(r) for name, r in rates.items()}
    per_job = {name: statistics.median(c) for name, c in cpu.items()}
    return {
        "jobs": jobs,
        "rounds": rounds,
        **{f"{name}_jobs_per_s": [round(r) for r in rs] for name, rs in rates.items()},
        **{f"{name}_cpu_us_per_job": [round(c, 1) for c in cs] for name, cs in cpu.items()},
        "with_over_without": round(med["with_fair_index"] / med["without_fair_index"], 3),
        "with_over_without_cpu": round(
            per_job["with_fair_index"] / per_job["without_fair_index"], 3
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=50_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--drain", type=int, default=20_000)
    parser.add_argument("--claimers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with (
        benchmark_server(os.environ.get("TICKQ_DATABASE_URL")) as admin,
        fresh_database(admin, "fair") as url,
        fresh_database(admin, "nofair") as bare,
    ):
        for target in (url, bare):
            with psycopg.connect(target) as conn:
                migrate(conn)
        with psycopg.connect(bare, autocommit=True) as conn:
            conn.execute("drop index tickq.jobs_fair_idx")
        result = {
            "claim": claim_costs(url, backlog=args.backlog, samples=args.samples, batch=args.batch),
            "drain": drains(
                url, jobs=args.drain, claimers=args.claimers, batch=args.batch, rounds=args.rounds
            ),
            "enqueue": enqueues(url, bare, jobs=args.drain, rounds=args.rounds),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
