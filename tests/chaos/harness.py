"""The soak's moving parts: a restartable PostgreSQL, supervised worker processes, a monitor
that checks the invariants every ~500 ms, and an enqueuer that adds and cancels jobs."""

from __future__ import annotations

import abc
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any
from uuid import UUID

import psycopg

from queue_core.errors import DatabaseError, TickqError
from queue_core.migrate import migrate
from queue_core.model.jobs import JobSpec
from queue_core.postgres import PostgresStore
from tests.chaos import invariants, limits, workload
from tickq.infra.local.postgres import LocalPostgres, create_database

ROOT = Path(__file__).resolve().parents[2]
DATABASE = "chaos"
# TickFunction reads its settings from the environment, as in Lambda.
FUNCTION_ENV = {
    "TICKQ_TASK_MODULES": "tests.chaos.chaos_tasks",
    "TICKQ_LEASE_SECONDS": str(limits.LEASE_SECONDS),
    "TICKQ_BATCH_SIZE": "8",
    "TICKQ_CONCURRENCY": "8",
    "TICKQ_SAFETY_MARGIN_MS": "0",
    "POWERTOOLS_SERVICE_NAME": "tickq-chaos",
    "POWERTOOLS_METRICS_NAMESPACE": "tickq-chaos",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class Database:
    """A PostgreSQL server whose data directory and port survive restarts, so workers keep
    one URL (TCP, since the socket directory is new on every start)."""

    def __init__(self, data_dir: Path) -> None:
        self.server = LocalPostgres(data_dir=data_dir)
        self.restarts = 0

    def start(self) -> None:
        self.server.start()

    def create(self) -> None:
        create_database(self.server.tcp_url, DATABASE)
        with psycopg.connect(self.url, autocommit=True) as conn:
            migrate(conn)
            conn.execute(invariants.SCHEMA)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.server.port}/{DATABASE}"

    def restart(self) -> None:
        """Fast shutdown (every session is aborted), then start on the same port and data.

        Call from the thread that started the server: its death signal follows that thread.
        """
        self.server.stop()
        self.server.start()
        self.restarts += 1

    def stop(self) -> None:
        self.server.stop()


@dataclass
class Worker:
    """One supervised process: `tickq work` (long-lived), `tickq tick` (one tick, started
    again each time it ends, like a scheduled function) or `function` (TickFunction's
    handler invoked again and again in one warm process)."""

    kind: str
    proc: subprocess.Popen[bytes]
    out: IO[bytes]


@dataclass
class Supervisor:
    url: str
    logs: Path
    works: int
    ticks: int
    functions: int
    workers: list[Worker] = field(default_factory=list)
    exits: Counter[str] = field(default_factory=Counter)
    kills: int = 0
    started: int = 0
    lost_leases: int = 0

    def command(self, kind: str) -> list[str]:
        if kind == "function":
            return [sys.executable, "-m", "tests.chaos.tick_function"]
        common = [
            "--tasks",
            "tests.chaos.chaos_tasks",
            "--lease-seconds",
            str(limits.LEASE_SECONDS),
            "--batch-size",
            "8",
            "--concurrency",
            "8",
        ]
        base = [sys.executable, "-m", "tickq.infra.cli.program", kind, "--json", *common]
        return [*base, "--poll-interval", "0.2"] if kind == "work" else base

    def spawn(self, kind: str) -> None:
        out = (self.logs / f"{kind}-{self.started}.json").open("wb")
        env = {
            **os.environ,
            **FUNCTION_ENV,
            "TICKQ_DATABASE_URL": self.url,
            "PYTHONPATH": str(ROOT),
        }
        stderr = (self.logs / f"{kind}-{self.started}.err").open("wb")
        proc = subprocess.Popen(self.command(kind), cwd=ROOT, env=env, stdout=out, stderr=stderr)
        stderr.close()
        self.workers.append(Worker(kind, proc, out))
        self.started += 1

    def fill(self) -> None:
        """Replace every worker that ended (crashed, killed, or a tick that finished)."""
        for worker in [w for w in self.workers if w.proc.poll() is not None]:
            self.workers.remove(worker)
            self.exits[_exit_reason(worker.proc.returncode)] += 1
            self._collect(worker)
        wanted_by_kind = (("work", self.works), ("tick", self.ticks), ("function", self.functions))
        for kind, wanted in wanted_by_kind:
            for _ in range(wanted - sum(w.kind == kind for w in self.workers)):
                self.spawn(kind)

    def kill_one(self, rng: random.Random) -> None:
        alive = [w for w in self.workers if w.proc.poll() is None]
        if alive:
            rng.choice(alive).proc.send_signal(signal.SIGKILL)
            self.kills += 1

    def stop(self) -> None:
        for worker in self.workers:
            if worker.proc.poll() is None:
                worker.proc.send_signal(signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.proc.kill()
                worker.proc.wait()
            self._collect(worker)
        self.workers.clear()

    def _collect(self, worker: Worker) -> None:
        worker.out.close()
        if worker.kind == "function":
            return  # its stdout carries the invocations' EMF metric lines, not one report
        with contextlib.suppress(OSError, ValueError):
            report = json.loads(Path(worker.out.name).read_text())
            self.lost_leases += int(report.get("lost_leases", 0))


def _exit_reason(code: int) -> str:
    if code == 0:
        return "finished"
    if code == -signal.SIGKILL:
        return "killed"
    if code == limits.CRASH_EXIT_CODE:
        return "handler os._exit"
    if code == limits.EVIDENCE_LOST_EXIT_CODE:
        return "execution record not written"
    if code == 3:
        return "database error"
    return f"exit {code}"


class Reconnecting(threading.Thread, abc.ABC):
    """Runs `round` every `interval` seconds on its own connection until stopped,
    reconnecting across database restarts (counted as outages). Any other failure is
    collected in `failures`, never raised from the thread, and ends it (and the test)."""

    label = "thread"

    def __init__(self, url: str, interval: float, name: str) -> None:
        super().__init__(daemon=True, name=name)
        self.url = url
        self.interval = interval
        self.stop_event = threading.Event()
        self.failures: list[str] = []
        self.outages = 0

    @abc.abstractmethod
    def round(self, conn: psycopg.Connection[Any]) -> None:
        """One round of the thread's work on a live connection."""

    def run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        try:
            while not self.stop_event.wait(self.interval):
                try:
                    if conn is None or conn.closed or conn.broken:
                        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=2)
                    self.round(conn)
                except psycopg.OperationalError:
                    self.outages += 1
                    conn = None
        except Exception as exc:  # any other failure is the test's, not the database's
            self.failures.append(f"{self.label} failed: {type(exc).__name__}: {exc}")
        finally:
            if conn is not None:
                conn.close()


class Monitor(Reconnecting):
    """Checks the invariants every `interval` seconds from its own connection, reconnecting
    across database restarts. Violations are collected, never raised from the thread; so is
    any failure other than the database being away, which ends the monitor and the test."""

    label = "monitor"

    def __init__(self, url: str, interval: float = 0.5) -> None:
        super().__init__(url, interval, "chaos-monitor")
        self.violations: list[str] = []
        self.rounds = 0

    def round(self, conn: psycopg.Connection[Any]) -> None:
        found = invariants.violations(conn, invariants.ALWAYS)
        self.rounds += 1
        for violation in found:
            if violation not in self.violations:
                self.violations.append(violation)


class PartitionChurn(Reconnecting):
    """Creates and drops partitions of finished jobs while the workers run, as maintenance
    and retention do in production. Started with today's partition gone, so finishes land
    in the default partition until the first round gives today a partition again, moving
    them in under the workers' feet; then every round drops an empty day ahead and makes
    it again. Reconnects across database restarts; other failures fail the test."""

    label = "partition churn"

    def __init__(self, url: str, interval: float = 2.0) -> None:
        super().__init__(url, interval, "chaos-partitions")
        self.created = 0
        self.dropped = 0

    @staticmethod
    def drop_today(url: str) -> None:
        """Drop today's (still empty) partition, before any job finishes."""
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "select tickq.jobs_partition_drop("
                "tickq.jobs_partition_name((now() at time zone 'UTC')::date))"
            )

    def round(self, conn: psycopg.Connection[Any]) -> None:
        row = conn.execute(PARTITIONS_ENSURE).fetchone()
        self.created += row[0] if row else 0
        if conn.execute(PARTITION_DROP_AHEAD).fetchone():
            self.dropped += 1


PARTITIONS_ENSURE = "select tickq.jobs_partitions_ensure((now() at time zone 'UTC')::date, 3)"
# The day after tomorrow: no job finishes there, so dropping it loses nothing.
PARTITION_DROP_AHEAD = """
select * from tickq.jobs_partition_drop(
    tickq.jobs_partition_name((now() at time zone 'UTC')::date + 2))
"""


RECORD_ENQUEUE = """
insert into chaos.enqueues (idempotency_key, job_id, duplicate, asked_at)
values (%(key)s, %(id)s, %(duplicate)s, %(asked_at)s)
"""

# A running execution that will outlive its lease: cancelling it makes the reclaim, not
# the handler, decide its fate (cancelled, since it was asked to stop).
SLEEPER = """
select job_id from chaos.executions
where ended_at is null and action = 'sleep_past_lease'
order by id desc limit 1
"""


def record_enqueues(
    conn: psycopg.Connection[Any], specs: list[JobSpec], at: datetime, results: list[Any]
) -> None:
    """Write what an enqueue was answered, for the idempotency and no-job-lost invariants."""
    with conn.cursor() as cur:
        cur.executemany(
            RECORD_ENQUEUE,
            [
                {"key": spec.idempotency_key, "id": r.id, "duplicate": r.duplicate, "asked_at": at}
                for spec, r in zip(specs, results, strict=True)
            ],
        )


def database_now(conn: psycopg.Connection[Any]) -> datetime:
    row = conn.execute("select clock_timestamp()").fetchone()
    assert row is not None
    return row[0]


class Enqueuer(threading.Thread):
    """Adds jobs of every kind in workload.KINDS while the soak runs and records each
    answer; cancels a few jobs, often one whose execution is outliving its lease. Any
    failure other than the database being away ends it and fails the test."""

    def __init__(self, url: str, *, until: float, rate: float, seed: int) -> None:
        super().__init__(daemon=True, name="chaos-enqueuer")
        self.url = url
        self.until = until
        self.rate = rate
        self.rng = random.Random(seed)
        self.ids: set[UUID] = set()
        self.duplicates = 0
        self.cancels = 0
        self.outages = 0
        self.failures: list[str] = []

    def run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        n = 0
        try:
            while time.monotonic() < self.until:
                time.sleep(1 / self.rate)
                try:
                    if conn is None or conn.closed or conn.broken:
                        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=2)
                    self.step(conn, n)
                    n += 1
                except (DatabaseError, psycopg.OperationalError):
                    self.outages += 1
                    conn = None
        except Exception as exc:
            self.failures.append(f"enqueuer failed: {type(exc).__name__}: {exc}")
        finally:
            if conn is not None:
                conn.close()

    def step(self, conn: psycopg.Connection[Any], n: int) -> None:
        store = PostgresStore(conn)
        spec = workload.draw(self.rng, n)
        asked_at = database_now(conn)
        result = store.enqueue(spec)
        self.ids.add(result.id)
        self.duplicates += result.duplicate
        record_enqueues(conn, [spec], asked_at, [result])
        roll = self.rng.random()
        target = None
        if roll < 0.1:
            row = conn.execute(SLEEPER).fetchone()
            target = row[0] if row else None
        elif roll < 0.13:
            target = self.rng.choice(sorted(self.ids))
        if target is not None:
            with contextlib.suppress(TickqError):  # already finished: refused, fine
                store.cancel(target)
                self.cancels += 1


def unfinished(url: str) -> int | None:
    """How many jobs have not ended yet; None while the database does not answer (a soak's
    drain waits on through a restart)."""
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
            row = conn.execute(
                "select count(*) from tickq.jobs"
                " where status not in ('succeeded', 'dead', 'cancelled')"
            ).fetchone()
    except psycopg.OperationalError:
        return None
    return None if row is None else int(row[0])
