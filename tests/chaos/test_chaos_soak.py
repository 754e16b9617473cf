"""Chaos soak: real worker processes drain jobs while being SIGKILLed, while handlers crash
their own process, and while PostgreSQL itself restarts; nothing may be lost.

Bounded for CI (about a minute). For a long run:

    TICKQ_SOAK_SECONDS=600 TICKQ_SOAK_JOBS=5000 .venv/bin/pytest -s tests/chaos

The invariants (tests/chaos/invariants.py) are checked every ~200 ms while it runs and once
more at the end, with the check that every job finished.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

from queue_core import validation
from queue_core.store import PostgresStore
from tests.chaos import invariants
from tests.chaos.harness import Database, Enqueuer, Monitor, Supervisor

CHAOS_SECONDS = float(os.environ.get("TICKQ_SOAK_SECONDS", "35"))
INITIAL_JOBS = int(os.environ.get("TICKQ_SOAK_JOBS", "1200"))
# Time to finish what is left once the faults stop; long runs leave a long backlog.
DRAIN_SECONDS = max(120.0, CHAOS_SECONDS)
DB_RESTART_EVERY = 90.0  # long runs restart PostgreSQL this often; short runs once, midway
SEED = int(os.environ.get("TICKQ_SOAK_SEED", str(random.randrange(1_000_000))))


def enqueue_initial(url: str, count: int) -> set[Any]:
    specs = [
        validation.job_spec(
            "chaos",
            {"n": n},
            idempotency_key=f"initial-{n // 2}" if n % 10 == 0 else None,
            priority=n % 3,
        )
        for n in range(count)
    ]
    with psycopg.connect(url, autocommit=True) as conn:
        return {r.id for r in PostgresStore(conn).enqueue_many(specs)}


def restart_times(started: float) -> list[float]:
    if CHAOS_SECONDS <= DB_RESTART_EVERY:
        return [started + CHAOS_SECONDS * 0.4]
    count = int(CHAOS_SECONDS // DB_RESTART_EVERY)
    return [started + DB_RESTART_EVERY * (i + 0.5) for i in range(count)]


def unfinished(url: str) -> int | None:
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
            row = conn.execute(
                "select count(*) from tickq.jobs"
                " where status not in ('succeeded', 'dead', 'cancelled')"
            ).fetchone()
    except psycopg.OperationalError:
        return None
    return None if row is None else int(row[0])


def summary(url: str, supervisor: Supervisor, enqueuer: Enqueuer, **extra: Any) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        outcomes = dict(conn.execute("select status, count(*) from tickq.jobs group by 1"))
        attempts = conn.execute("select coalesce(sum(attempts), 0) from tickq.jobs").fetchone()
        reclaimed = conn.execute(
            "select count(*) from chaos.audit where old_status = 'running'"
            " and new_status in ('retrying', 'dead', 'cancelled')"
            " and error in ('lease expired', 'cancelled while running')"
            " and new_token is null"
        ).fetchone()
        effects = dict(conn.execute("select kind, count(*) from chaos.effects group by 1"))
    return {
        "seed": SEED,
        "jobs": sum(outcomes.values()),
        "outcomes": outcomes,
        "attempts": attempts[0] if attempts else None,
        "worker_kills": supervisor.kills,
        "worker_exits": dict(supervisor.exits),
        "worker_processes_started": supervisor.started,
        "leases_reclaimed": reclaimed[0] if reclaimed else None,
        "lost_leases_reported_by_workers": supervisor.lost_leases,
        "handler_effects": effects,
        "duplicates_returned": enqueuer.duplicates,
        "cancels": enqueuer.cancels,
        **extra,
    }


def test_no_job_is_lost_under_kills_crashes_and_a_database_restart(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    db = Database(tmp_path / "pgdata")
    db.start()
    db.create()
    supervisor = Supervisor(db.url, logs=tmp_path, works=2, ticks=1, functions=1)
    monitor = Monitor(db.url)
    try:
        expected = enqueue_initial(db.url, INITIAL_JOBS)
        started = time.monotonic()
        enqueuer = Enqueuer(db.url, until=started + CHAOS_SECONDS * 0.8, rate=10, seed=SEED)
        monitor.start()
        enqueuer.start()

        # Chaos phase: the main thread supervises, kills and restarts the database (the
        # server's parent-death signal is tied to the thread that started it).
        restarts = restart_times(started)
        next_kill = started + rng.uniform(1, 4)
        while (now := time.monotonic()) < started + CHAOS_SECONDS:
            supervisor.fill()
            if now >= next_kill:
                supervisor.kill_one(rng)
                next_kill = now + rng.uniform(1, 4)
            if restarts and now >= restarts[0]:
                restarts.pop(0)
                db.restart()
            time.sleep(0.2)
        enqueuer.join()
        expected |= enqueuer.ids

        # Drain: no more faults, the workers finish what is left.
        drain_deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < drain_deadline and unfinished(db.url) != 0:
            supervisor.fill()
            time.sleep(0.5)
        duration = time.monotonic() - started
        supervisor.stop()
        monitor.stop_event.set()
        monitor.join()

        with psycopg.connect(db.url, autocommit=True) as conn:
            present = {row[0] for row in conn.execute("select id from tickq.jobs")}
            final = invariants.violations(conn, {**invariants.CHECKS, **invariants.FINAL_CHECKS})
        lost = sorted(map(str, expected - present))
        violations = monitor.violations + final + ([f"lost jobs: {lost[:5]}"] if lost else [])
        report = summary(
            db.url,
            supervisor,
            enqueuer,
            database_restarts=db.restarts,
            duration_seconds=round(duration, 1),
            monitor_rounds=monitor.rounds,
            violations=len(violations),
        )
        print("chaos soak summary:", report)
    finally:
        supervisor.stop()
        monitor.stop_event.set()
        db.stop()

    assert violations == []
    assert report["worker_kills"] > 0 and db.restarts >= 1 and monitor.rounds > 0
    assert Counter(report["outcomes"]).keys() <= {"succeeded", "dead", "cancelled"}
