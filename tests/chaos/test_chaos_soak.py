"""Chaos soak: real worker processes drain jobs while being SIGKILLed, while handlers crash
their own process or hang past their timeout (heartbeating), and while PostgreSQL itself
restarts; nothing may be lost, and no job stays running past its timeout plus the reclaim
interval.

Bounded for CI (about a minute). For a long run:

    TICKQ_SOAK_SECONDS=600 TICKQ_SOAK_JOBS=5000 .venv/bin/pytest -s tests/chaos

The invariants (tests/chaos/invariants.py) are computed from evidence the engine never
writes: the handlers' own record of each execution, a trigger's record of every row
version and the enqueuer's record of every answer. They are checked every ~500 ms while it
runs and all of them once more at the end, with the checks that no job was lost or stuck.
Meanwhile partitions of finished jobs are created and dropped (harness.PartitionChurn).
A failure of the monitor or the enqueuer fails the test. `TICKQ_SOAK_SEED` replays a run's
choices (worker timing still differs).
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

from queue_core.postgres import PostgresStore
from tests.chaos import invariants, workload
from tests.chaos.harness import (
    Database,
    Enqueuer,
    Monitor,
    PartitionChurn,
    Supervisor,
    database_now,
    record_enqueues,
    unfinished,
)

CHAOS_SECONDS = float(os.environ.get("TICKQ_SOAK_SECONDS", "35"))
INITIAL_JOBS = int(os.environ.get("TICKQ_SOAK_JOBS", "1200"))
# Time to finish what is left once the faults stop; long runs leave a long backlog.
DRAIN_SECONDS = max(120.0, CHAOS_SECONDS)
DB_RESTART_EVERY = 90.0  # long runs restart PostgreSQL this often; short runs once, midway
SEED = int(os.environ.get("TICKQ_SOAK_SEED", str(random.randrange(1_000_000))))


def enqueue_initial(url: str, count: int, rng: random.Random) -> set[Any]:
    specs = [workload.draw(rng, n) for n in range(count)]
    with psycopg.connect(url, autocommit=True) as conn:
        asked_at = database_now(conn)
        results = PostgresStore(conn).enqueue_many(specs)
        record_enqueues(conn, specs, asked_at, results)
    return {r.id for r in results}


def restart_times(started: float) -> list[float]:
    if CHAOS_SECONDS <= DB_RESTART_EVERY:
        return [started + CHAOS_SECONDS * 0.4]
    count = int(CHAOS_SECONDS // DB_RESTART_EVERY)
    return [started + DB_RESTART_EVERY * (i + 0.5) for i in range(count)]


# Executions whose lease the engine ended (reclaimed, then often claimed again) before they
# reported: each handed the runner an outcome under a token that was no longer the job's.
STALE_REPORTS = """
select count(*) from chaos.executions e
where e.reported is not null
  and exists (select from chaos.versions v
              where v.old_token = e.lease_token and v.new_token is distinct from e.lease_token
                and v.at < e.ended_at)
"""


# Leases the engine ended on its own (expired, then reclaimed): no report of the holder's
# explains the new status.
RECLAIMS = """
select count(*) from chaos.versions v
where v.op = 'update' and v.old_token is not null and v.new_token is null
  and not exists (select from chaos.executions e join chaos.reports r using (reported)
                  where e.lease_token = v.old_token and e.ended_at <= v.at
                    and r.status = v.new_status)
"""


def summary(url: str, supervisor: Supervisor, enqueuer: Enqueuer, **extra: Any) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:

        def one(query: str) -> Any:
            row = conn.execute(query).fetchone()
            return None if row is None else row[0]

        outcomes: dict[str, int] = dict(
            conn.execute("select status, count(*) from tickq.jobs group by 1")
        )
        actions: dict[str, int] = dict(
            conn.execute("select action, count(*) from chaos.executions group by 1")
        )
        reports: dict[str, int] = dict(
            conn.execute(
                "select coalesce(reported, 'none'), count(*) from chaos.executions group by 1"
            )
        )
        reclaimed = one(RECLAIMS)
        return {
            "seed": SEED,
            "jobs": sum(outcomes.values()),
            "outcomes": outcomes,
            "attempts": one("select coalesce(sum(attempts), 0) from tickq.jobs"),
            "executions_by_action": actions,
            "executions_by_report": reports,
            "stale_reports_refused": one(STALE_REPORTS),
            "row_versions": one("select count(*) from chaos.versions"),
            "job_dead_events": one(
                "select count(*) from tickq.outbox where detail_type = 'Job Dead'"
            ),
            "tx_succeeded_events": one(
                "select count(*) from tickq.outbox where detail_type = 'Job Succeeded'"
            ),
            "worker_kills": supervisor.kills,
            "worker_exits": dict(supervisor.exits),
            "worker_processes_started": supervisor.started,
            "leases_reclaimed": reclaimed,
            "lost_leases_reported_by_workers": supervisor.lost_leases,
            "enqueues_answered": one("select count(*) from chaos.enqueues"),
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
    churn = PartitionChurn(db.url)
    try:
        PartitionChurn.drop_today(db.url)  # the first finishes land in the default partition
        expected = enqueue_initial(db.url, INITIAL_JOBS, rng)
        started = time.monotonic()
        enqueuer = Enqueuer(db.url, until=started + CHAOS_SECONDS * 0.8, rate=10, seed=SEED)
        monitor.start()
        enqueuer.start()
        churn.start()

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
        churn.stop_event.set()
        churn.join()

        with psycopg.connect(db.url, autocommit=True) as conn:
            present = {row[0] for row in conn.execute("select id from tickq.jobs")}
            final = invariants.violations(conn, {**invariants.ALWAYS, **invariants.AT_END})
        lost = sorted(map(str, expected - present))
        violations = [
            *monitor.failures,
            *enqueuer.failures,
            *churn.failures,
            *monitor.violations,
            *(v for v in final if v not in monitor.violations),
            *([f"lost jobs: {lost[:5]}"] if lost else []),
        ]
        report = summary(
            db.url,
            supervisor,
            enqueuer,
            database_restarts=db.restarts,
            duration_seconds=round(duration, 1),
            monitor_rounds=monitor.rounds,
            monitor_outages=monitor.outages,
            partitions_created=churn.created,
            partitions_dropped=churn.dropped,
            violations=len(violations),
        )
        print("chaos soak summary:", report)
        for violation in violations:
            print("chaos soak violation:", violation)
    finally:
        supervisor.stop()
        monitor.stop_event.set()
        churn.stop_event.set()
        db.stop()

    assert violations == [], f"seed {SEED}: rerun with TICKQ_SOAK_SEED={SEED}"
    assert report["worker_kills"] > 0 and db.restarts >= 1 and monitor.rounds >= 10
    # Today's partition came back under the workers, and days were dropped and made again.
    assert report["partitions_created"] >= 2 and report["partitions_dropped"] >= 1, report
    assert report["stale_reports_refused"] > 0, "no execution outlived its lease: fence untested"
    assert Counter(report["outcomes"]).keys() <= {"succeeded", "dead", "cancelled"}
    # Deaths happened, each with its one event (the invariant above): the outbox was tested.
    assert report["job_dead_events"] >= report["outcomes"].get("dead", 0) > 0, report
    # Transactional successes wrote their events (one each, the invariant above).
    assert report["tx_succeeded_events"] > 0, report
