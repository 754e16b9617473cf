"""Chaos soak with fairness groups and a cap per group: worker processes drain jobs of
several tenants while being SIGKILLed, while handlers crash their own process, and while
PostgreSQL restarts. Besides the soak's invariants, at no sampled moment may a group run
more jobs of the capped type than its cap, and every job must finish.

Bounded for CI (well under a minute of chaos); TICKQ_SOAK_SECONDS and TICKQ_SOAK_SEED
reproduce or lengthen a run, as for the main soak.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from queue_core.model import validation
from queue_core.policies.limits import Limits, type_limit
from queue_core.postgres import PostgresStore
from tests.chaos.capped import CapMonitor, soak

JOBS = 400
GROUPS = 5
CAP = 2

OVER_CAP = """
    select j.type, j.group_key, count(*), l.max_running_per_group
    from tickq.jobs j join tickq.type_limits l on l.type = j.type
    where j.status = 'running' and l.max_running_per_group is not null
    group by j.type, j.group_key, l.max_running_per_group
    having count(*) > l.max_running_per_group
"""
BUSIEST = """
    select coalesce(max(n), 0) from (
        select count(*) as n from tickq.jobs where status = 'running' group by group_key) g
"""


def monitor(url: str) -> CapMonitor:
    return CapMonitor(
        url, check="running count above a per-group cap", over_cap=OVER_CAP, busiest=BUSIEST
    )


def prepare(url: str) -> None:
    specs = [
        validation.job_spec("chaos", {"n": n}, group=f"tenant-{n % GROUPS}", priority=n % 2)
        for n in range(JOBS)
    ]
    with psycopg.connect(url, autocommit=True) as conn:
        Limits(conn).set_type(type_limit("chaos", max_running_per_group=CAP))
        PostgresStore(conn).enqueue_many(specs)


def test_no_group_runs_above_its_cap_under_kills_crashes_and_a_restart(tmp_path: Path) -> None:
    run = soak(tmp_path, prepare, monitor)

    summary = run.summary
    assert run.monitor.violations + run.final == [], summary
    assert run.monitor.rounds > 50 and run.supervisor.kills > 0 and run.db.restarts == 1, summary
    busiest = {**summary, "busiest": run.monitor.busiest}
    assert run.monitor.busiest == CAP, busiest  # the cap was reached
