"""Durable steps under chaos: step-structured jobs run by `tickq work`, `tickq tick
--max-seconds` and warm TickFunction processes that are SIGKILLed at random and whose steps
crash their own process mid-step. Every job must end, and every step of a succeeded job must
be stored exactly once, by an attempt that held the lease when its fn completed, and never
run again once stored.

Bounded for CI (about 40 s); TICKQ_STEPS_SOAK_SECONDS and TICKQ_STEPS_SOAK_JOBS make it
longer. Reuses the main soak's harness (tests/chaos/harness.py) and invariants.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from queue_core import validation
from queue_core.store import PostgresStore
from tests.chaos import harness, invariants
from tests.chaos.harness import Database, Monitor, Supervisor

CHAOS_SECONDS = float(os.environ.get("TICKQ_STEPS_SOAK_SECONDS", "25"))
JOBS = int(os.environ.get("TICKQ_STEPS_SOAK_JOBS", "60"))
STEPS_PER_JOB = 8
DRAIN_SECONDS = 120.0
SEED = int(os.environ.get("TICKQ_SOAK_SEED", str(random.randrange(1_000_000))))

STEP_CHECKS: dict[str, str] = {
    # A stored step names the lease its fn ran under; that fn's fenced effect must exist.
    "stored step without its fn's fenced effect": """
        select s.job_id, s.name from tickq.job_steps s
        where not exists (select from chaos.effects e
                          where e.job_id = s.job_id and e.kind = 'step:' || s.name
                            and e.lease_token = (s.result ->> 'lease_token')::uuid)
    """,
    # Once stored, a step is returned from storage: its fn never completes again.
    "a stored step's fn ran again": """
        select s.job_id, s.name, e.at from tickq.job_steps s
        join chaos.effects e on e.job_id = s.job_id and e.kind = 'step:' || s.name
        where e.at > s.finished_at and e.lease_token <> (s.result ->> 'lease_token')::uuid
    """,
}
FINAL_STEP_CHECKS: dict[str, str] = {
    "succeeded job without every step stored once": f"""
        select j.id, count(s.name) from tickq.jobs j
        left join tickq.job_steps s on s.job_id = j.id
        where j.status = 'succeeded'
        group by j.id having count(s.name) <> {STEPS_PER_JOB}
    """,
    "a result that differs from the stored steps": """
        select j.id from tickq.jobs j
        where j.status = 'succeeded'
          and j.result -> 'steps' <> (select jsonb_agg(s.result order by s.name)
                                      from tickq.job_steps s where s.job_id = j.id)
    """,
}


class StepSupervisor(Supervisor):
    """The main soak's supervisor with the step handler, and ticks that end after 1.5 s as
    a function timeout would (steps that would not fit suspend their job)."""

    def command(self, kind: str) -> list[str]:
        command = [
            "tests.chaos.step_tasks" if part == "tests.chaos.chaos_tasks" else part
            for part in super().command(kind)
        ]
        return [*command, "--max-seconds", "1.5"] if kind == "tick" else command


def test_every_step_is_stored_exactly_once_under_kills_and_crashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(harness.FUNCTION_ENV, "TICKQ_TASK_MODULES", "tests.chaos.step_tasks")
    rng = random.Random(SEED)
    db = Database(tmp_path / "pgdata")
    db.start()
    db.create()
    supervisor = StepSupervisor(db.url, logs=tmp_path, works=1, ticks=1, functions=1)
    checks = {**invariants.CHECKS, **STEP_CHECKS}
    monitor = Monitor(db.url)
    monkeypatch.setattr(invariants, "CHECKS", checks)
    try:
        specs = [validation.job_spec("chaos-steps", {"steps": STEPS_PER_JOB}) for _ in range(JOBS)]
        with psycopg.connect(db.url, autocommit=True) as conn:
            expected = {r.id for r in PostgresStore(conn).enqueue_many(specs)}
        started = time.monotonic()
        monitor.start()
        next_kill = started + rng.uniform(1, 3)
        while (now := time.monotonic()) < started + CHAOS_SECONDS:
            supervisor.fill()
            if now >= next_kill:
                supervisor.kill_one(rng)
                next_kill = now + rng.uniform(1, 3)
            time.sleep(0.2)
        drain_deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < drain_deadline and _unfinished(db.url):
            supervisor.fill()
            time.sleep(0.5)
        supervisor.stop()
        monitor.stop_event.set()
        monitor.join()

        final_checks = {**checks, **invariants.FINAL_CHECKS, **FINAL_STEP_CHECKS}
        with psycopg.connect(db.url, autocommit=True) as conn:
            present = {row[0] for row in conn.execute("select id from tickq.jobs")}
            final = invariants.violations(conn, final_checks)
            report = _summary(conn, supervisor)
        violations = monitor.violations + final
        if expected - present:
            violations.append(f"lost jobs: {sorted(map(str, expected - present))[:5]}")
        print("durable steps soak summary:", {"seed": SEED, **report}, file=sys.stderr)
    finally:
        supervisor.stop()
        monitor.stop_event.set()
        db.stop()

    assert violations == [], f"seed {SEED}: {violations}"
    assert report["worker_kills"] > 0 and monitor.rounds > 0
    assert report["outcomes"].get("succeeded", 0) > JOBS // 2
    assert report["suspensions"] > 0, "no job ever crossed a tick"


def _unfinished(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "select count(*) from tickq.jobs where status not in ('succeeded', 'dead', 'cancelled')"
        ).fetchone()
    return bool(row and row[0])


def _summary(conn: psycopg.Connection[Any], supervisor: Supervisor) -> dict[str, Any]:
    outcomes = dict(conn.execute("select status, count(*) from tickq.jobs group by 1").fetchall())
    counts = conn.execute(
        "select (select count(*) from tickq.job_steps),"
        " (select count(*) from chaos.effects where kind like 'step:%%'),"
        " (select coalesce(sum(resumes), 0) from tickq.jobs)"
    ).fetchone()
    assert counts is not None
    dead = conn.execute(
        "select left(error, 40), count(*) from tickq.jobs where status = 'dead' group by 1"
    ).fetchall()
    return {
        "outcomes": outcomes,
        "dead_errors": dict(dead),
        "steps_stored": counts[0],
        # Completions beyond the stored ones: fns whose result a crash kept from being stored.
        "step_fn_completions": counts[1],
        "suspensions": counts[2],
        "worker_kills": supervisor.kills,
        "worker_exits": dict(Counter(supervisor.exits)),
    }
