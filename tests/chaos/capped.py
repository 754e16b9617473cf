"""A chaos soak under a cap (a cap per fairness group, a cap per flow key): worker processes
drain the jobs a test prepared while being SIGKILLed, while handlers crash their own process,
and while PostgreSQL restarts once; a monitor checks the soak's invariants and the cap every
100 ms. Each capped soak supplies only its jobs and its cap's two queries."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from tests.chaos import invariants
from tests.chaos.harness import Database, Supervisor, unfinished

CHAOS_SECONDS = min(float(os.environ.get("TICKQ_SOAK_SECONDS", "20")), 600.0)
DRAIN_SECONDS = 150.0
SEED = int(os.environ.get("TICKQ_SOAK_SEED", str(random.randrange(1_000_000))))


class CapMonitor(threading.Thread):
    """The soak's invariants plus "no running count above the cap" (`over_cap`, named
    `check`), and the busiest running count seen (`busiest`), every 100 ms from its own
    connection across database restarts; never raises."""

    def __init__(self, url: str, *, check: str, over_cap: str, busiest: str) -> None:
        super().__init__(daemon=True, name="chaos-cap-monitor")
        self.url = url
        self.checks = {**invariants.ALWAYS, check: over_cap}
        self.busiest_query = busiest
        self.stop_event = threading.Event()
        self.violations: list[str] = []
        self.busiest = 0
        self.rounds = 0

    def run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        while not self.stop_event.wait(0.1):
            try:
                if conn is None or conn.closed or conn.broken:
                    conn = psycopg.connect(self.url, autocommit=True, connect_timeout=2)
                found = invariants.violations(conn, self.checks)
                self.busiest = max(self.busiest, conn.execute(self.busiest_query).fetchone()[0])
            except psycopg.OperationalError:
                conn = None
                continue
            self.rounds += 1
            self.violations += [v for v in found if v not in self.violations]
        if conn is not None:
            conn.close()


@dataclass
class Soak:
    """What a capped soak did: its kills and restarts, its monitor, the final violations."""

    supervisor: Supervisor
    db: Database
    monitor: CapMonitor
    final: list[str]

    @property
    def summary(self) -> dict[str, Any]:
        return {"seed": SEED, "kills": self.supervisor.kills, "restarts": self.db.restarts}


def soak(
    tmp_path: Path, prepare: Callable[[str], None], monitor: Callable[[str], CapMonitor]
) -> Soak:
    """Prepare the jobs, then CHAOS_SECONDS of kills with one restart half-way, then drain."""
    rng = random.Random(SEED)
    db = Database(tmp_path / "pgdata")
    db.start()
    db.create()
    supervisor = Supervisor(db.url, logs=tmp_path, works=2, ticks=1, functions=1)
    watch = monitor(db.url)
    try:
        prepare(db.url)
        watch.start()
        started = time.monotonic()
        restart_at = started + CHAOS_SECONDS * 0.5
        next_kill = started + rng.uniform(1, 4)
        while (now := time.monotonic()) < started + CHAOS_SECONDS:
            supervisor.fill()
            if now >= next_kill:
                supervisor.kill_one(rng)
                next_kill = now + rng.uniform(1, 4)
            if restart_at and now >= restart_at:
                restart_at = 0.0
                db.restart()
            time.sleep(0.2)
        drain_deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < drain_deadline and unfinished(db.url) != 0:
            supervisor.fill()
            time.sleep(0.5)
        supervisor.stop()
        watch.stop_event.set()
        watch.join()
        with psycopg.connect(db.url, autocommit=True) as conn:
            final = invariants.violations(conn, {**invariants.ALWAYS, **invariants.AT_END})
    finally:
        supervisor.stop()
        watch.stop_event.set()
        db.stop()
    return Soak(supervisor, db, watch, final)
