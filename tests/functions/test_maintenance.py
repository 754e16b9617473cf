"""MaintenanceFunction: reclaims expired leases and reports depth and age per queue/type."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import psycopg
import pytest

from queue_core import DatabaseError, PostgresStore, enqueue
from queue_core.policies.retention import Retention, policy
from tests.conftest import Connect
from tests.faults.backends import terminated_while_writing_live_jobs
from tickq.functions import db, maintenance

from .conftest import FakeContext, sample_event

pytestmark = pytest.mark.usefixtures("as_worker")


def test_reclaims_expired_leases_without_a_tick(
    conn: psycopg.Connection, lambda_context: FakeContext
) -> None:
    store = PostgresStore(conn)
    earlier = store.now() - timedelta(minutes=10)
    job = enqueue(conn, "crashy", max_attempts=2, now=earlier)
    store.claim(lease_seconds=30, now=earlier)

    answer = maintenance.handler(sample_event("maintenance"), lambda_context)

    assert answer["reclaimed"] == 1 and answer["dead"] == 0
    assert store.get(job.id).status == "retrying"


def _expired_lease(conn: psycopg.Connection) -> tuple[PostgresStore, str]:
    store = PostgresStore(conn)
    earlier = store.now() - timedelta(minutes=10)
    job = enqueue(conn, "crashy", max_attempts=2, now=earlier)
    store.claim(lease_seconds=30, now=earlier)
    return store, str(job.id)


def test_a_connection_lost_during_reclaim_is_reopened_and_the_pass_completes(
    conn: psycopg.Connection, connect: Connect, lambda_context: FakeContext
) -> None:
    # Given a job whose lease expired, and the function's connection, whose reclaim will
    # wait on a lock held here until its backend is terminated
    store, job_id = _expired_lease(conn)
    pid = db.connection().info.backend_pid

    # When the function runs, its reclaim statement dies with its backend mid-run
    started = time.monotonic()
    with terminated_while_writing_live_jobs(connect, pid) as terminated:
        answer = maintenance.handler({}, lambda_context)

    # Then it reconnected at once and reclaimed the lease on the new connection
    assert terminated.is_set()
    assert answer["reclaimed"] == 1 and answer["dead"] == 0
    assert store.get(job_id).status == "retrying"
    assert db.connection().info.backend_pid != pid
    assert time.monotonic() - started < 10


def test_a_connection_lost_with_no_time_left_ends_the_invocation_with_the_error(
    conn: psycopg.Connection, lambda_context: FakeContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an invocation whose time left is inside its safety margin, and its connection's
    # backend terminated
    monkeypatch.setenv("TICKQ_SAFETY_MARGIN_MS", "70000")  # the context has 60 s left
    store, job_id = _expired_lease(conn)
    conn.execute("select pg_terminate_backend(%s)", (db.connection().info.backend_pid,))

    # When the function runs, then its reclaim fails and no reconnect is tried for long
    started = time.monotonic()
    with pytest.raises(DatabaseError):
        maintenance.handler({}, lambda_context)
    assert time.monotonic() - started < 5
    assert store.get(job_id).status == "running"


def test_reports_depth_and_oldest_age_per_queue_and_type(
    conn: psycopg.Connection,
    lambda_context: FakeContext,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = PostgresStore(conn)
    now = store.now()
    enqueue(conn, "embed", now=now - timedelta(seconds=120))
    enqueue(conn, "embed", now=now - timedelta(seconds=30))
    enqueue(conn, "mail", queue="urgent", now=now - timedelta(seconds=5))
    enqueue(conn, "mail", queue="urgent", delay=3600)  # waiting, not yet runnable

    answer = maintenance.handler({}, lambda_context)

    by_key = {(q["queue"], q["type"]): q for q in answer["queues"]}
    assert by_key[("default", "embed")]["depth"] == 2
    assert by_key[("default", "embed")]["oldest_age"] >= 120
    assert by_key[("urgent", "mail")]["depth"] == 2
    assert 5 <= by_key[("urgent", "mail")]["oldest_age"] < 120
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    per_queue = [
        b
        for b in blobs
        if b["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"] == "oldest_runnable_age"
    ]
    assert {(b["queue"], b["type"]) for b in per_queue} == {
        ("default", "embed"),
        ("urgent", "mail"),
    }
    totals = [b for b in blobs if "oldest_runnable_age_max" in b]
    assert totals and totals[0]["queue_depth_total"] == [4.0]


def test_prunes_finished_jobs_by_retention_policy(
    conn: psycopg.Connection, lambda_context: FakeContext
) -> None:
    store = PostgresStore(conn)
    long_ago = store.now() - timedelta(days=3)
    old = enqueue(conn, "report", now=long_ago)
    [claimed] = store.claim(now=long_ago)
    store.complete(claimed, {"ok": True}, now=long_ago)
    fresh = enqueue(conn, "report")
    Retention(conn).set(policy(max_age="1d"))

    answer = maintenance.handler({}, lambda_context)

    assert answer["pruned"]["deleted"] == 1 and answer["pruned"]["complete"]
    remaining = [row[0] for row in conn.execute("select id from tickq.jobs")]
    assert remaining == [fresh.id] and old.id not in remaining


def test_counts_jobs_waiting_for_parents_per_queue_and_type(
    conn: psycopg.Connection,
    lambda_context: FakeContext,
    capsys: pytest.CaptureFixture[str],
) -> None:
    parent = enqueue(conn, "extract")
    for _ in range(2):
        enqueue(conn, "embed", queue="vectors", after=[parent.id])

    answer = maintenance.handler({}, lambda_context)

    by_key = {(q["queue"], q["type"]): q for q in answer["queues"]}
    assert by_key[("vectors", "embed")]["waiting"] == 2
    assert by_key[("vectors", "embed")]["depth"] == 0  # waiting jobs are not runnable
    assert (by_key[("default", "extract")]["depth"], by_key[("default", "extract")]["waiting"]) == (
        1,
        0,
    )
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    waiting = [b for b in blobs if "waiting_for_parents" in b]
    assert {(b["queue"], b["type"], b["waiting_for_parents"][0]) for b in waiting} == {
        ("vectors", "embed", 2.0),
        ("default", "extract", 0.0),
    }


def test_jobs_only_a_flow_key_holds_back_are_no_depth_and_no_oldest_age(
    conn: psycopg.Connection,
    lambda_context: FakeContext,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given, long due, a job of a held key and two of a key at its cap (one runs), and a
    # job of a free key due for 30 s
    from queue_core.model.flow import flow_limit
    from queue_core.policies.flow_limits import FlowLimits

    store = PostgresStore(conn)
    now = store.now()
    hour_ago = now - timedelta(seconds=3600)
    enqueue(conn, "sync", flow_keys=["shop:held"], now=hour_ago)
    enqueue(conn, "sync", flow_keys=["api:capped"], now=hour_ago - timedelta(seconds=1))
    (running,) = store.claim(limit=1)
    assert running.flow_keys == ["api:capped"]
    enqueue(conn, "sync", flow_keys=["api:capped"], now=hour_ago)
    enqueue(conn, "sync", flow_keys=["shop:free"], now=now - timedelta(seconds=30))
    FlowLimits(conn).hold("shop:held", 3600)
    FlowLimits(conn).set(flow_limit("api:", max_running=1))

    answer = maintenance.handler({}, lambda_context)

    # Then they are counted apart, out of the depth and the oldest runnable age
    (sync,) = [q for q in answer["queues"] if q["type"] == "sync"]
    assert (sync["depth"], sync["flow_held"]) == (1, 2)
    assert 30 <= sync["oldest_age"] < 600
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    (totals,) = [b for b in blobs if "oldest_runnable_age_max" in b]
    assert totals["oldest_runnable_age_max"][0] < 600
    assert (totals["queue_depth_total"], totals["flow_held_total"]) == ([1.0], [2.0])
    # and so for operators' counts, and not for an hour once the hold and the cap go
    (queued,) = [r for r in store.stats_all_users() if r.type == "sync" and r.status == "queued"]
    assert (queued.runnable, queued.flow_held) == (1, 2)
    FlowLimits(conn).release("shop:held")
    FlowLimits(conn).clear("api:")
    (queued,) = [r for r in store.stats() if r.type == "sync" and r.status == "queued"]
    assert (queued.runnable, queued.flow_held) == (3, 0)
    assert queued.oldest_runnable_seconds is not None and queued.oldest_runnable_seconds >= 3600
