"""The soak's moving parts: a restartable PostgreSQL, supervised worker processes, a monitor
that checks the invariants every ~200 ms, and an enqueuer that adds and cancels jobs."""

from __future__ import annotations

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
from pathlib import Path
from typing import IO, Any
from uuid import UUID

import psycopg

from infra.localdb import LocalPostgres, create_database
from queue_core import validation
from queue_core.errors import DatabaseError, TickqError
from queue_core.migrate import migrate
from queue_core.store import PostgresStore
from tests.chaos import invariants, limits

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
        base = [sys.executable, "-m", "infra.cli", kind, "--json", *common]
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
    if code == 3:
        return "database error"
    return f"exit {code}"


class Monitor(threading.Thread):
    """Checks the invariants every `interval` seconds from its own connection, reconnecting
    across database restarts; violations are collected, never raised from the thread."""

    def __init__(self, url: str, interval: float = 0.2) -> None:
        super().__init__(daemon=True, name="chaos-monitor")
        self.url = url
        self.interval = interval
        self.stop_event = threading.Event()
        self.violations: list[str] = []
        self.rounds = 0

    def run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        while not self.stop_event.wait(self.interval):
            try:
                if conn is None or conn.closed or conn.broken:
                    conn = psycopg.connect(self.url, autocommit=True, connect_timeout=2)
                found = invariants.violations(conn, invariants.CHECKS)
            except psycopg.OperationalError:
                conn = None
                continue
            self.rounds += 1
            for violation in found:
                if violation not in self.violations:
                    self.violations.append(violation)
        if conn is not None:
            conn.close()


class Enqueuer(threading.Thread):
    """Adds jobs while the soak runs, some under idempotency keys that repeat (a duplicate
    must return the live job), and cancels a few; remembers every job id it was given."""

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

    def run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        n = 0
        while time.monotonic() < self.until:
            time.sleep(1 / self.rate)
            try:
                if conn is None or conn.closed or conn.broken:
                    conn = psycopg.connect(self.url, autocommit=True, connect_timeout=2)
                self.step(PostgresStore(conn), n)
                n += 1
            except (DatabaseError, psycopg.OperationalError):
                self.outages += 1
                conn = None
        if conn is not None:
            conn.close()

    def step(self, store: PostgresStore, n: int) -> None:
        key = f"key-{self.rng.randrange(200)}" if self.rng.random() < 0.5 else None
        spec = validation.job_spec("chaos", {"n": n, "late": True}, idempotency_key=key)
        result = store.enqueue(spec)
        self.ids.add(result.id)
        self.duplicates += result.duplicate
        if self.ids and self.rng.random() < 0.05:
            with contextlib.suppress(TickqError):  # already finished: refused, fine
                store.cancel(self.rng.choice(sorted(self.ids)))
                self.cancels += 1
