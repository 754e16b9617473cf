"""Chaos soak with flow keys and a cap per key: worker processes drain jobs of a few keys
while being SIGKILLed, while handlers crash their own process, and while PostgreSQL
restarts. Besides the soak's invariants, at no sampled moment may a key run more jobs than
its cap (a killed worker's job holds its key until the reclaim frees it, once), and every
job must finish.

Bounded for CI (well under a minute of chaos); TICKQ_SOAK_SECONDS and TICKQ_SOAK_SEED
reproduce or lengthen a run, as for the main soak.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from queue_core.model import validation
from queue_core.model.flow import flow_limit
from queue_core.policies.flow_limits import FlowLimits
from queue_core.postgres import PostgresStore
from tests.chaos.capped import CapMonitor, soak

JOBS = 400
KEYS = 5
CAP = 2

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


def monitor(url: str) -> CapMonitor:
    return CapMonitor(
        url, check="running count above a flow key's cap", over_cap=OVER_CAP, busiest=BUSIEST
    )


def prepare(url: str) -> None:
    specs = [
        validation.job_spec("chaos", {"n": n}, flow_keys=[f"shop:{n % KEYS}"], priority=n % 2)
        for n in range(JOBS)
    ]
    with psycopg.connect(url, autocommit=True) as conn:
        FlowLimits(conn).set(flow_limit("shop:", max_running=CAP))
        PostgresStore(conn).enqueue_many(specs)


def test_no_flow_key_runs_above_its_cap_under_kills_crashes_and_a_restart(tmp_path: Path) -> None:
    run = soak(tmp_path, prepare, monitor)

    summary = run.summary
    assert run.monitor.violations + run.final == [], summary
    assert run.monitor.rounds > 50 and run.supervisor.kills > 0 and run.db.restarts == 1, summary
    busiest = {**summary, "busiest": run.monitor.busiest}
    assert run.monitor.busiest == CAP, busiest  # the cap was reached
