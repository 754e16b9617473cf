"""Chaos soak with flow keys and a cap per key: worker processes drain jobs of a few keys
while being SIGKILLed, while handlers crash their own process, and while PostgreSQL
restarts. Besides the soak's invariants, at no sampled moment may a key run more jobs than
its cap (a killed worker's job holds its key until the reclaim frees it, once), and every
job must finish.

Bounded for CI (well under a minute of chaos); TICKQ_SOAK_SECONDS and TICKQ_SOAK_SEED
reproduce or lengthen a run, as for the main soak.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from queue_core.model import validation
from queue_core.model.flow import flow_limit
from queue_core.policies.flow_limits import FlowLimits
from queue_core.postgres import PostgresStore
from tests.chaos import invariants
from tests.chaos.harness import Database, Supervisor, unfinished

CHAOS_SECONDS = min(float(os.environ.get("TICKQ_SOAK_SECONDS", "20")), 600.0)
JOBS = 400
KEYS = 5
CAP = 2
DRAIN_SECONDS = 150.0
SEED = int(os.environ.get("TICKQ_SOAK_SEED", str(random.randrange(1_000_000))))

OVER_CAP = """
    select k, count(*), g.max_running
    from tickq.jobs j cross join unnest(j.flow_keys) k
    cross join lateral tickq.flow_limit_of(k) g
    where j.status = 'running' and g.max_running is not null
    group by k, g.max_running
    having count(*) > g.max_running
"""
BUSIEST = """
    select coalesce(max(n), 0) from (
        select count(*) as n from tickq.jobs j cross join unnest(j.flow_keys) k
        where j.status = 'running' group by k) g
"""


class CapMonitor(threading.Thread):
    """The soak's invariants plus "no running count above a flow key's cap", checked every
    100 ms from its own connection across database restarts; never raises."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True, name="chaos-flow-monitor")
        self.url = url
        self.stop_event = threading.Event()
        self.violations: list[str] = []
        self.busiest = 0
        self.rounds = 0

    def run(self) -> None:
        checks = {**invariants.ALWAYS, "running count above a flow key's cap": OVER_CAP}
        conn: psycopg.Connection[Any] | None = None
        while not self.stop_event.wait(0.1):
            try:
                if conn is None or conn.closed or conn.broken:
                    conn = psycopg.connect(self.url, autocommit=True, connect_timeout=2)
                found = invariants.violations(conn, checks)
                self.busiest = max(self.busiest, conn.execute(BUSIEST).fetchone()[0])
            except psycopg.OperationalError:
                conn = None
                continue
            self.rounds += 1
            self.violations += [v for v in found if v not in self.violations]
        if conn is not None:
            conn.close()


def prepare(url: str) -> None:
    specs = [
        validation.job_spec("chaos", {"n": n}, flow_keys=[f"shop:{n % KEYS}"], priority=n % 2)
        for n in range(JOBS)
    ]
    with psycopg.connect(url, autocommit=True) as conn:
        FlowLimits(conn).set(flow_limit("shop:", max_running=CAP))
        PostgresStore(conn).enqueue_many(specs)


def test_no_flow_key_runs_above_its_cap_under_kills_crashes_and_a_restart(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    db = Database(tmp_path / "pgdata")
    db.start()
    db.create()
    supervisor = Supervisor(db.url, logs=tmp_path, works=2, ticks=1, functions=1)
    monitor = CapMonitor(db.url)
    try:
        prepare(db.url)
        monitor.start()
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
        monitor.stop_event.set()
        monitor.join()
        with psycopg.connect(db.url, autocommit=True) as conn:
            final = invariants.violations(conn, {**invariants.ALWAYS, **invariants.AT_END})
    finally:
        supervisor.stop()
        monitor.stop_event.set()
        db.stop()

    summary = {"seed": SEED, "kills": supervisor.kills, "restarts": db.restarts}
    assert monitor.violations + final == [], summary
    assert monitor.rounds > 50 and supervisor.kills > 0 and db.restarts == 1, summary
    assert monitor.busiest == CAP, {**summary, "busiest": monitor.busiest}  # the cap was reached
