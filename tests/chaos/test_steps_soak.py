"""Durable steps under chaos: step-structured jobs run by `tickq work`, `tickq tick
--max-seconds` and warm TickFunction processes that are SIGKILLed at random, whose steps
crash their own process, fail, or outlive their lease mid-step. Every job must end, and
every step of a succeeded job must be stored exactly once, by the lease its fn completed
under while that lease held, and never run again once stored; jobs cross ticks by
suspending.

Bounded for CI (about 40 s); TICKQ_STEPS_SOAK_SECONDS and TICKQ_STEPS_SOAK_JOBS make it
longer, TICKQ_SOAK_SEED replays a run's choices. Reuses the main soak's harness and all
of its invariants (tests/chaos/invariants.py), computed from evidence the engine never
writes: the handler's record of each execution and of where it may be suspended, each
step fn's record of its completion (chaos.step_runs) and every row version.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from queue_core.model import validation
from queue_core.postgres import PostgresStore
from tests.chaos import harness, invariants
from tests.chaos.harness import (
    Database,
    Monitor,
    Supervisor,
    database_now,
    record_enqueues,
    unfinished,
)
from tests.chaos.limits import STEP_BACKOFF, STEP_MAX_ATTEMPTS

CHAOS_SECONDS = float(os.environ.get("TICKQ_STEPS_SOAK_SECONDS", "25"))
JOBS = int(os.environ.get("TICKQ_STEPS_SOAK_JOBS", "60"))
# Long enough (about 1.5 s of steps) that a job claimed by a 1.5 s tick or function
# invocation has to suspend to finish, even on an idle machine.
STEPS_PER_JOB = 16
DRAIN_SECONDS = 120.0
SEED = int(os.environ.get("TICKQ_SOAK_SEED", str(random.randrange(1_000_000))))
TASKS = "tests.chaos.step_tasks"


class StepSupervisor(Supervisor):
    """The main soak's supervisor with the step handler, and ticks that end after 1.5 s as
    a function timeout would (steps that would not fit suspend their job)."""

    def command(self, kind: str) -> list[str]:
        command = [
            TASKS if part == "tests.chaos.chaos_tasks" else part for part in super().command(kind)
        ]
        return [*command, "--max-seconds", "1.5"] if kind == "tick" else command


def test_every_step_is_stored_exactly_once_under_kills_and_crashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(harness.FUNCTION_ENV, "TICKQ_TASK_MODULES", TASKS)
    rng = random.Random(SEED)
    db = Database(tmp_path / "pgdata")
    db.start()
    db.create()
    supervisor = StepSupervisor(db.url, logs=tmp_path, works=1, ticks=1, functions=1)
    monitor = Monitor(db.url)
    try:
        specs = [
            validation.job_spec(
                "chaos-steps",
                {"steps": STEPS_PER_JOB},
                max_attempts=STEP_MAX_ATTEMPTS,
                backoff_policy=STEP_BACKOFF,
            )
            for _ in range(JOBS)
        ]
        with psycopg.connect(db.url, autocommit=True) as conn:
            asked_at = database_now(conn)
            results = PostgresStore(conn).enqueue_many(specs)
            record_enqueues(conn, specs, asked_at, results)
        expected = {r.id for r in results}
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
        while time.monotonic() < drain_deadline and unfinished(db.url) != 0:
            supervisor.fill()
            time.sleep(0.5)
        supervisor.stop()
        monitor.stop_event.set()
        monitor.join()

        with psycopg.connect(db.url, autocommit=True) as conn:
            present = {row[0] for row in conn.execute("select id from tickq.jobs")}
            final = invariants.violations(conn, {**invariants.ALWAYS, **invariants.AT_END})
            report = _summary(conn, supervisor)
        violations = [
            *monitor.failures,
            *monitor.violations,
            *(v for v in final if v not in monitor.violations),
        ]
        if expected - present:
            violations.append(f"lost jobs: {sorted(map(str, expected - present))[:5]}")
        print("durable steps soak summary:", {"seed": SEED, **report})
        for violation in violations:
            print("chaos soak violation:", violation)
    finally:
        supervisor.stop()
        monitor.stop_event.set()
        db.stop()

    assert violations == [], f"seed {SEED}: rerun with TICKQ_SOAK_SEED={SEED}"
    assert report["worker_kills"] > 0 and monitor.rounds >= 10
    assert report["outcomes"].get("succeeded", 0) > JOBS // 2
    assert report["executions_by_report"].get("suspended", 0) > 0, "no job crossed a tick"
    assert report["resumes"] > 0, "no suspended job came back"


def _summary(conn: psycopg.Connection[Any], supervisor: Supervisor) -> dict[str, Any]:
    def one(query: str) -> Any:
        row = conn.execute(query).fetchone()
        return None if row is None else row[0]

    dead = conn.execute(
        "select left(error, 40), count(*) from tickq.jobs where status = 'dead' group by 1"
    ).fetchall()
    return {
        "outcomes": dict(conn.execute("select status, count(*) from tickq.jobs group by 1")),
        "dead_errors": dict(dead),
        "executions_by_report": dict(
            conn.execute(
                "select coalesce(reported, 'none'), count(*) from chaos.executions group by 1"
            )
        ),
        "steps_stored": one("select count(*) from tickq.job_steps"),
        # Completions beyond the stored ones: fns whose result a crash kept from being
        # stored, or whose lease had ended when they completed.
        "step_fn_completions": one("select count(*) from chaos.step_runs"),
        "resumes": one("select coalesce(sum(resumes), 0) from tickq.jobs"),
        "row_versions": one("select count(*) from chaos.versions"),
        "worker_kills": supervisor.kills,
        "worker_exits": dict(supervisor.exits),
    }
