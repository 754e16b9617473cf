"""Dead tuples of the live partition under a fixed offered load: a producer enqueues at
`--rate` jobs per second for `--seconds` while a worker (Runner.work, the loop `tickq work`
runs, at `--concurrency`) drains them, and every second the table statistics of
tickq.jobs_live and its TOAST table are sampled (n_dead_tup, n_live_tup, autovacuum runs).

A queue's dead tuples come at the pace of its throughput (two per job), and autovacuum
removes them when it comes by: the peak is about the dead tuples of the time between two
visits, which the server's autovacuum_naptime bounds. "peak ÷ jobs/s" says how many
seconds of throughput the peak held. With `--before REF`, the tree at REF (`git archive`,
its own migrations and engine) runs the same load on the same server, one after the other
in one run. `--naptime` starts the throwaway server with that autovacuum_naptime (stock:
one minute). `--payload-bytes` gives each job a payload of that size (random text: TOAST
above about 2 kB).

    python -m bench.dead_tuples [--rate 600] [--seconds 300] [--before REF]
                                [--concurrency 32] [--naptime SECONDS] [--payload-bytes N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import psycopg

from tickq.infra.local.postgres import LocalPostgres

from .dependencies_cost import tree_at
from .server import DURABLE_SETTINGS, benchmark_server, fresh_database, server_description

ROOT = Path(__file__).resolve().parents[1]
# How often the producer enqueues (one statement each): ten times a second.
PRODUCER_STEP = 0.1


@dataclass
class Samples:
    """One row per second: the live partition's and its TOAST table's statistics."""

    dead: list[int] = field(default_factory=list)
    live: list[int] = field(default_factory=list)
    toast_dead: list[int] = field(default_factory=list)
    autovacuums: int = 0


@dataclass(frozen=True)
class Result:
    label: str
    offered: float  # jobs enqueued per second
    completed: float  # jobs the worker finished per second over the same time
    backlog: int  # jobs enqueued and not finished when the producer stopped
    samples: Samples


# The children: one process each for the consumer and the producer, importing queue_core
# from the tree they measure (PYTHONPATH), so an old tree runs its own engine and schema.


def consume(url: str, concurrency: int) -> None:
    """Migrate, say ready, drain until stdin closes; print the jobs that succeeded."""
    from queue_core import PostgresStore, Registry, Runner
    from queue_core.migrate import migrate

    with psycopg.connect(url) as conn:
        migrate(conn)
    registry = Registry()
    registry.task("noop")(lambda job: None)
    conn = psycopg.connect(url, autocommit=True)
    runner = Runner(PostgresStore(conn), registry, batch_size=concurrency, concurrency=concurrency)
    stop = threading.Event()
    print("ready", flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    report = runner.work(stop=stop, poll_interval=0.05)
    print(report.succeeded, flush=True)


def produce(url: str, rate: float, seconds: float, payload_bytes: int) -> None:
    """Say ready, wait for a line, enqueue `rate` jobs a second for `seconds` (catching up
    when a statement took longer than a step); print how many and over how long."""
    import queue_core

    # Random text: a repeated character would compress to nothing and never reach TOAST.
    payload = {"pad": secrets.token_hex(payload_bytes // 2)} if payload_bytes else {}
    with psycopg.connect(url, autocommit=True) as conn:
        print("ready", flush=True)
        sys.stdin.readline()
        started = time.monotonic()
        sent = 0
        while (elapsed := time.monotonic() - started) < seconds:
            due = int(rate * elapsed) - sent
            if due > 0:
                requests = [{"type": "noop", "payload": payload}] * due
                queue_core.enqueue_many(conn, requests)
                sent += due
            time.sleep(max(0.0, PRODUCER_STEP - (time.monotonic() - started - elapsed)))
        print(sent, time.monotonic() - started, flush=True)


def _child(tree: Path | None, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    paths = [str(tree)] if tree else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.dead_tuples", "--child", *args],
        cwd=tree or ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise RuntimeError(f"the {args[0]} process did not start")
    return proc


def _pipes(proc: subprocess.Popen[str]) -> tuple[IO[str], IO[str]]:
    assert proc.stdin is not None and proc.stdout is not None
    return proc.stdin, proc.stdout


_STATS = (
    "select coalesce(n_dead_tup, 0), coalesce(n_live_tup, 0), coalesce(autovacuum_count, 0)"
    " from (select 'tickq.jobs_live'::regclass::oid) heap(relid)"
    " left join pg_stat_all_tables s using (relid)"
    " union all select coalesce(n_dead_tup, 0), 0, 0 from pg_class c"
    " left join pg_stat_all_tables s on s.relid = c.reltoastrelid"
    " where c.oid = 'tickq.jobs_live'::regclass"
)


def sample(url: str, done: threading.Event) -> Samples:
    """Every second until `done`: the statistics of jobs_live and of its TOAST table, each
    query its own transaction (statistics are read as a snapshot per transaction)."""
    found = Samples()
    first_vacuums: int | None = None
    with psycopg.connect(url, autocommit=True) as conn:
        while not done.wait(1.0):
            (dead, live, vacuums), (toast_dead, _, _) = conn.execute(_STATS).fetchall()
            found.dead.append(dead)
            found.live.append(live)
            found.toast_dead.append(toast_dead)
            first_vacuums = vacuums if first_vacuums is None else first_vacuums
            found.autovacuums = vacuums - first_vacuums
    return found


def measure(label: str, admin_url: str, tree: Path | None, args: argparse.Namespace) -> Result:
    """One tree under the load, on a fresh database of its own."""
    with fresh_database(admin_url, "dead") as url:
        consumer = _child(tree, "consume", url, str(args.concurrency))
        producer = _child(
            tree, "produce", url, str(args.rate), str(args.seconds), str(args.payload_bytes)
        )
        done = threading.Event()
        sampled: list[Samples] = []
        sampler = threading.Thread(target=lambda: sampled.append(sample(url, done)))
        sampler.start()
        to_producer, from_producer = _pipes(producer)
        to_producer.write("go\n")
        to_producer.flush()
        sent_text, seconds_text = from_producer.readline().split()
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "select count(*) from tickq.jobs"
                " where status in ('waiting', 'queued', 'running', 'retrying')"
            ).fetchone()
        done.set()
        sampler.join()
        to_consumer, from_consumer = _pipes(consumer)
        to_consumer.close()
        from_consumer.readline()  # the consumer's last batch is in
        for proc in (producer, consumer):
            if proc.wait(timeout=120) != 0:
                raise RuntimeError(f"{label}: a child process failed")
    assert row is not None
    sent, seconds = int(sent_text), float(seconds_text)
    backlog = int(row[0])
    return Result(label, sent / seconds, (sent - backlog) / seconds, backlog, sampled[0])


def render(results: list[Result]) -> str:
    """One row per tree. Dead share: the mean dead tuples over the mean of dead and live."""
    lines = [
        "| tree | offered jobs/s | completed jobs/s | backlog at end | samples"
        " | peak dead | mean dead | dead share | peak ÷ jobs/s (s) | autovacuums"
        " | TOAST peak dead |",
        "|---" * 11 + "|",
    ]
    for r in results:
        s = r.samples
        mean_dead = statistics.fmean(s.dead) if s.dead else 0.0
        mean_rows = mean_dead + (statistics.fmean(s.live) if s.live else 0.0)
        share = mean_dead / mean_rows if mean_rows else 0.0
        peak = max(s.dead, default=0)
        held = peak / r.completed if r.completed else 0.0
        lines.append(
            f"| {r.label} | {r.offered:,.0f} | {r.completed:,.0f} | {r.backlog:,}"
            f" | {len(s.dead)} | {peak:,} | {mean_dead:,.0f} | {share:.0%} | {held:.1f}"
            f" | {s.autovacuums} | {max(s.toast_dead, default=0):,} |"
        )
    return "\n".join(lines)


@contextlib.contextmanager
def server(url: str | None, naptime: float | None) -> Iterator[str]:
    """The durable benchmark server; with `naptime`, a throwaway one with that
    autovacuum_naptime."""
    if naptime is None:
        with benchmark_server(url) as admin_url:
            yield admin_url
        return
    settings = {**DURABLE_SETTINGS, "autovacuum_naptime": f"{naptime:g}s"}
    with LocalPostgres(fsync=True, settings=settings) as local:
        yield local.url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dead_tuples", description=__doc__)
    parser.add_argument("--rate", type=float, default=600.0, help="jobs offered per second")
    parser.add_argument("--seconds", type=float, default=300.0, help="how long to offer them")
    parser.add_argument("--before", help="also run the tree at this git ref, same server")
    parser.add_argument("--concurrency", type=int, default=32, help="handlers and batch size")
    parser.add_argument("--naptime", type=float, help="autovacuum_naptime of a local server")
    parser.add_argument("--payload-bytes", type=int, default=0, help="payload size per job")
    parser.add_argument("--database-url", default=os.environ.get("TICKQ_DATABASE_URL"))
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        role, url, *rest = args.child
        if role == "consume":
            consume(url, int(rest[0]))
        else:
            produce(url, float(rest[0]), float(rest[1]), int(rest[2]))
        return 0
    if args.rate <= 0 or args.seconds <= 0 or args.concurrency < 1 or args.payload_bytes < 0:
        parser.error("--rate, --seconds and --concurrency must be positive, --payload-bytes >= 0")
    if args.naptime is not None and (args.database_url or not 1 <= args.naptime <= 2_147_483):
        parser.error("--naptime (1 to 2147483 seconds) needs the throwaway local server")
    with server(args.database_url, args.naptime) as admin_url, contextlib.ExitStack() as stack:
        print(f"server: {server_description(admin_url)}", file=sys.stderr)
        trees: list[tuple[str, Path | None]] = []
        if args.before:
            trees.append((f"tickq@{args.before}", stack.enter_context(tree_at(args.before))))
        trees.append(("this tree", None))
        results = []
        for label, tree in trees:
            results.append(measure(label, admin_url, tree, args))
            print(f"{label} done", file=sys.stderr, flush=True)
    print(render(results))
    naptime = f"{args.naptime:g}s" if args.naptime else "as the server has it"
    print(
        f"\n{args.rate:g} jobs/s offered for {args.seconds:g} s, worker concurrency"
        f" {args.concurrency}, payload {args.payload_bytes} bytes, autovacuum_naptime"
        f" {naptime};"
        " sampled every second"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
