"""tickq.jobs in partitions: live jobs apart, finished ones by day (queue_core/schema/tables.sql).

A missing day never fails a finish, maintenance gives days their partitions and moves rows
out of the default one, retention drops whole days and still keeps what a policy keeps, and
a deleted job takes its steps, signals and edges along.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

import psycopg
import pytest

from queue_core import PostgresStore
from queue_core.migrate import migrate
from queue_core.model.validation import job_spec
from queue_core.policies import partitions
from queue_core.policies.retention import Retention, policy
from queue_core.postgres.statements import QUERIES

NOW = datetime(2030, 6, 1, tzinfo=UTC)
OLD_DAY = date(2030, 5, 1)  # a month before NOW: past a week's retention


def where(conn: psycopg.Connection, job_id: object) -> str:
    """The partition holding a job."""
    row = conn.execute(
        "select tableoid::regclass::text from tickq.jobs where id = %s", (job_id,)
    ).fetchone()
    assert row is not None, f"job {job_id} is gone"
    return str(row[0])


def finished_on(conn: psycopg.Connection, day: date, n: int, status: str = "succeeded") -> None:
    """n jobs of `status` that finished on `day`, in that day's partition."""
    at = datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
    conn.execute(
        "insert into tickq.jobs (type, status, finished_at)"
        " select 't', %s, %s - g * interval '1 second' from generate_series(1, %s) g",
        (status, at, n),
    )
    partitions.ensure(conn, days_ahead=0, now=at)


def partition_names(conn: psycopg.Connection) -> list[str]:
    return [p.name for p in partitions.partitions(conn)]


def test_a_finish_on_a_day_without_partition_lands_in_the_default_one_until_maintenance(
    conn: psycopg.Connection,
) -> None:
    # Given a day far ahead of every partition made
    store = PostgresStore(conn)
    day = datetime(2031, 3, 4, 9, tzinfo=UTC)
    assert "jobs_done_20310304" not in partition_names(conn)
    store.enqueue(job_spec("t"), now=day)
    (job,) = store.claim(now=day)
    assert where(conn, job.id) == "tickq.jobs_live"

    # When the job finishes that day, Then it succeeds, kept in the default partition
    store.complete(job, {"ok": True}, now=day)
    finished = store.get(job.id)
    assert finished.status == "succeeded"
    assert where(conn, job.id) == "tickq.jobs_done_default"

    # When maintenance runs, Then the day has a partition and the job moved there unchanged
    created = partitions.ensure(conn, now=datetime(2030, 1, 1, tzinfo=UTC))
    assert created >= 1 and "jobs_done_20310304" in partition_names(conn)
    assert where(conn, job.id) == "tickq.jobs_done_20310304"
    assert store.get(job.id) == finished
    assert conn.execute("select count(*) from tickq.jobs_done_default").fetchone() == (0,)


def test_maintenance_makes_partitions_ahead_and_is_idempotent(conn: psycopg.Connection) -> None:
    start = datetime(2032, 2, 27, tzinfo=UTC)
    assert partitions.ensure(conn, days_ahead=3, now=start) == 4
    names = partition_names(conn)
    for name in ("20320227", "20320228", "20320229", "20320301"):
        assert f"jobs_done_{name}" in names
    assert partitions.ensure(conn, days_ahead=3, now=start) == 0


def test_a_bulk_load_gets_the_days_it_spans_first(conn: psycopg.Connection) -> None:
    since = datetime(2033, 1, 30, 18, tzinfo=UTC)
    until = datetime(2033, 2, 2, tzinfo=UTC)  # exclusive: Feb 2 is not spanned
    assert partitions.ensure_partitions(conn, since=since, until=until, days_ahead=0) >= 3
    names = partition_names(conn)
    assert {"jobs_done_20330130", "jobs_done_20330131", "jobs_done_20330201"} <= set(names)
    assert "jobs_done_20330202" not in names


def test_a_bad_days_ahead_is_refused(conn: psycopg.Connection) -> None:
    with pytest.raises(Exception, match="days_ahead"):
        partitions.ensure(conn, days_ahead=-1)
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        conn.execute("select tickq.jobs_partitions_ensure(current_date, 1000)")


def test_statements_about_live_jobs_read_only_the_live_partition(
    conn: psycopg.Connection,
) -> None:
    # Given finished jobs in a day partition beside the live ones
    finished_on(conn, OLD_DAY, 100)
    for name in ("jobs_reclaim", "jobs_extend_lease", "jobs_report_progress", "jobs_claim_recover"):
        assert "jobs_done" not in _plan(conn, name), name
    # Finishing and claiming read live jobs only (finished rows move out as they are written).
    for name in ("jobs_finish_and_claim", "jobs_finish_and_claim_queues"):
        plan = _plan(conn, name)
        assert "jobs_live" in plan and "jobs_done" not in plan, (name, plan)


def test_the_claims_inside_functions_lease_from_the_live_partition_alone(
    conn: psycopg.Connection,
) -> None:
    # tickq.jobs_lease (which leases the rows of every claim) and tickq.claim_fair: every
    # lookup by id of the rows they lease names a constant list of live statuses, so the
    # planner reads jobs_live alone.
    for name in ("tickq.claim_fair", "tickq.jobs_lease"):
        body = conn.execute("select pg_get_functiondef(%s::regproc)", (name,)).fetchone()[0]
        lookups = [
            line
            for line in body.splitlines()
            if "j.id = any(" in line or "j on j.id = c.id" in line
        ]
        assert lookups, name
        for line in lookups:
            assert "j.status in (" in line, (name, line)


def _plan(conn: psycopg.Connection, name: str) -> str:
    params = {
        "now": NOW,
        "outcomes": "[]",
        "succeeded_ids": [],
        "succeeded_tokens": [],
        "queue": "default",
        "queues": ["default"],
        "limit": 10,
        "lease_seconds": 30,
        "seconds": 30,
        "after": None,
        "positions": [],
        "seed": None,
        "seeds": [bytes(16)],
        "id": "00000000-0000-0000-0000-000000000001",
        "lease_token": "00000000-0000-0000-0000-000000000002",
        "progress": "{}",
    }
    with conn.cursor() as cur:
        cur.execute("explain " + QUERIES[name], params)
        return "\n".join(r[0] for r in cur.fetchall())


def test_retention_drops_whole_days_past_every_policy(conn: psycopg.Connection) -> None:
    # Given a month-old day of finished jobs, one with a step, a signal and an edge
    finished_on(conn, OLD_DAY, 50)
    finished_on(conn, OLD_DAY, 10, status="cancelled")
    (old_id,) = conn.execute(
        "select id from tickq.jobs where finished_at::date = %s limit 1", (OLD_DAY,)
    ).fetchone()
    _hang_on(conn, old_id)
    finished_on(conn, NOW.date() - timedelta(days=1), 5)  # yesterday: kept
    retention = Retention(conn)
    retention.set(policy(max_age="7d", statuses=["succeeded", "cancelled", "dead"]))

    # When retention prunes
    report = retention.prune(now=NOW)

    # Then the old day went whole, counted, and took what hung on its jobs along
    assert "jobs_done_20300501" in report.partitions_dropped
    assert "jobs_done_20300501" not in partition_names(conn)
    assert report.by_status == {"succeeded": 50, "cancelled": 10}
    assert report.by_policy == {"all jobs": 60}
    assert _hanging(conn, old_id) == (0, 0, 0)
    # Yesterday's five, and the child of the edge (finished at NOW)
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (6,)


def test_a_day_holding_jobs_a_policy_keeps_is_not_dropped(conn: psycopg.Connection) -> None:
    # Given an old day with succeeded and dead jobs, and a policy keeping dead ones
    finished_on(conn, OLD_DAY, 20)
    finished_on(conn, OLD_DAY, 2, status="dead")
    retention = Retention(conn)
    retention.set(policy(max_age="7d"))

    report = retention.prune(now=NOW)

    # Then the day stays, its succeeded jobs pruned row by row, the dead ones kept
    assert "jobs_done_20300501" not in report.partitions_dropped
    assert "jobs_done_20300501" in partition_names(conn)
    assert report.by_status == {"succeeded": 20}
    assert conn.execute("select status, count(*) from tickq.jobs group by 1").fetchall() == [
        ("dead", 2)
    ]


def test_keep_last_n_keeps_the_newest_even_in_old_days(conn: psycopg.Connection) -> None:
    # Given old days only, and a policy keeping the newest 3 (and no max age)
    finished_on(conn, OLD_DAY, 10)
    finished_on(conn, OLD_DAY + timedelta(days=1), 10)
    newest = conn.execute(
        "select id from tickq.jobs order by finished_at desc, id desc limit 3"
    ).fetchall()
    retention = Retention(conn)
    retention.set(policy(keep_last=3))

    report = retention.prune(now=NOW)

    # Then no day went whole, and exactly the newest three remain
    assert report.partitions_dropped == []
    assert report.deleted == 17
    assert conn.execute("select id from tickq.jobs order by finished_at desc").fetchall() == newest


def test_a_per_queue_policy_keeping_longer_keeps_the_day(conn: psycopg.Connection) -> None:
    finished_on(conn, OLD_DAY, 5)
    retention = Retention(conn)
    retention.set(policy(max_age="7d"))
    retention.set(policy(queue="audit", max_age="365d"))

    report = retention.prune(now=NOW)

    assert "jobs_done_20300501" not in report.partitions_dropped
    assert report.deleted == 5  # row by row: the catch-all governs these jobs


def test_without_a_catch_all_policy_no_day_is_dropped(conn: psycopg.Connection) -> None:
    # Jobs no policy governs are kept: a day holding any of them stays whole.
    finished_on(conn, OLD_DAY, 5)
    retention = Retention(conn)
    retention.set(policy(queue="bulk", max_age="7d"))

    report = retention.prune(now=NOW)

    assert (report.partitions_dropped, report.deleted) == ([], 0)
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (5,)


def test_a_day_holding_a_parent_an_unfinished_child_needs_is_kept(
    conn: psycopg.Connection,
) -> None:
    # Given an old day whose one job is the parent of a waiting child
    finished_on(conn, OLD_DAY, 1)
    (parent,) = conn.execute("select id from tickq.jobs").fetchone()
    conn.execute("update tickq.jobs set has_children = true where id = %s", (parent,))
    (child,) = conn.execute(
        "insert into tickq.jobs (type, status, pending_parents) values ('t', 'waiting', 1)"
        " returning id"
    ).fetchone()
    conn.execute(
        "insert into tickq.job_dependencies (child_id, parent_id) values (%s, %s)",
        (child, parent),
    )
    retention = Retention(conn)
    retention.set(policy(max_age="7d"))

    report = retention.prune(now=NOW)

    assert "jobs_done_20300501" not in report.partitions_dropped
    assert where(conn, parent) == "tickq.jobs_done_20300501"


def test_deleting_or_truncating_jobs_takes_their_steps_signals_and_edges(
    conn: psycopg.Connection,
) -> None:
    finished_on(conn, OLD_DAY, 2)
    first, second = (r[0] for r in conn.execute("select id from tickq.jobs order by id"))
    _hang_on(conn, first)
    _hang_on(conn, second)

    conn.execute("delete from tickq.jobs where id = %s", (first,))
    assert _hanging(conn, first) == (0, 0, 0)
    assert _hanging(conn, second) == (1, 1, 1)

    conn.execute("truncate tickq.jobs")
    assert _hanging(conn, second) == (0, 0, 0)


def _hang_on(conn: psycopg.Connection, job_id: object) -> None:
    """A step, a signal and an edge (to a waiting child) on the job."""
    conn.execute(
        "insert into tickq.job_steps (job_id, name, result, size, finished_at)"
        " values (%s, 's', '1', 1, now())",
        (job_id,),
    )
    conn.execute(
        "insert into tickq.job_signals (job_id, name, size, sent_at) values (%s, 'go', 0, now())",
        (job_id,),
    )
    (child,) = conn.execute(
        "insert into tickq.jobs (type, status, finished_at) values ('t', 'cancelled', %s)"
        " returning id",
        (NOW,),
    ).fetchone()
    conn.execute(
        "insert into tickq.job_dependencies (child_id, parent_id) values (%s, %s)",
        (child, job_id),
    )


def _hanging(conn: psycopg.Connection, job_id: object) -> tuple[int, int, int]:
    row = conn.execute(
        "select (select count(*) from tickq.job_steps where job_id = %(id)s),"
        " (select count(*) from tickq.job_signals where job_id = %(id)s),"
        " (select count(*) from tickq.job_dependencies where parent_id = %(id)s)",
        {"id": job_id},
    ).fetchone()
    assert row is not None
    return (row[0], row[1], row[2])


def test_migrate_gives_today_a_partition_even_with_nothing_to_apply(
    conn: psycopg.Connection,
) -> None:
    today = conn.execute(
        "select tickq.jobs_partition_name((now() at time zone 'UTC')::date)"
    ).fetchone()[0]
    partitions.ensure(conn)  # (a test before may have dropped it)
    conn.execute("select * from tickq.jobs_partition_drop(%s)", (today,))
    assert today not in partition_names(conn)

    assert migrate(conn) == []

    assert today in partition_names(conn)


def test_a_finish_that_waited_out_its_days_attach_lands_in_the_new_partition(
    conn: psycopg.Connection, connect: Callable[[], psycopg.Connection]
) -> None:
    """A finish on a day without partition, held back while maintenance moves that day's
    rows out of the default partition and attaches the day, goes on into the new partition
    instead of failing the default's new check (which failed its job's attempt)."""
    day = datetime(2031, 7, 8, 9, tzinfo=UTC)
    store = PostgresStore(conn)
    store.enqueue(job_spec("t"), now=day)
    (job,) = store.claim(now=day)
    conn.execute(  # a job that finished earlier that day, in the default partition
        "insert into tickq.jobs (type, status, finished_at) values ('t', 'succeeded', %s)",
        (day - timedelta(hours=1),),
    )
    # Maintenance is held inside its move of that row, its locks taken, until the gate opens.
    conn.execute("create table public.attach_gate (opened boolean)")
    conn.execute(
        "create function public.attach_wait() returns trigger language plpgsql as $$"
        " begin while not exists (select from public.attach_gate) loop"
        " perform pg_sleep(0.01); end loop; return old; end $$"
    )
    conn.execute(
        "create trigger attach_wait before delete on tickq.jobs_done_default"
        " for each row execute function public.attach_wait()"
    )
    maintenance, finisher = connect(), connect()
    failures: dict[str, BaseException] = {}

    def run(name: str, fn: Callable[[], object]) -> threading.Thread:
        def target() -> None:
            try:
                fn()
            except BaseException as exc:  # reported by the assertions below
                failures[name] = exc

        thread = threading.Thread(target=target)
        thread.start()
        return thread

    def waiting(connection: psycopg.Connection, event: str) -> bool:
        row = conn.execute(
            "select wait_event_type, wait_event from pg_stat_activity where pid = %s",
            (connection.info.backend_pid,),
        ).fetchone()
        return row is not None and event in row

    try:
        ensuring = run("ensure", lambda: partitions.ensure(maintenance, days_ahead=0, now=day))
        wait_until(lambda: waiting(maintenance, "PgSleep"))
        finishing = run(
            "finish", lambda: PostgresStore(finisher).complete(job, {"ok": True}, now=day)
        )
        wait_until(lambda: waiting(finisher, "Lock"))
        conn.execute("insert into public.attach_gate values (true)")
        ensuring.join(30)
        finishing.join(30)
    finally:
        conn.execute("insert into public.attach_gate values (true)")
        ensuring.join(30)
        conn.execute("drop trigger attach_wait on tickq.jobs_done_default")
        conn.execute("drop function public.attach_wait()")
        conn.execute("drop table public.attach_gate")

    assert failures == {}
    assert store.get(job.id).status == "succeeded"
    assert where(conn, job.id) == "tickq.jobs_done_20310708"


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the race's next step"
        time.sleep(0.01)
