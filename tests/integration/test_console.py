"""The operator console against PostgreSQL: paused queues in the claim, the charts' counts
and depth history, and bulk actions by users and by operators."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import psycopg
import pytest

from queue_core.console.charts import QueueHistory
from queue_core.console.jobs import (
    BulkAction,
    CountChanged,
    JobFilter,
    OperatorConsole,
    act_as_user,
    as_operator,
)
from queue_core.errors import InvalidJob
from queue_core.model.flow import flow_limit
from queue_core.model.validation import job_spec
from queue_core.policies.flow_limits import FlowLimits
from queue_core.policies.pauses import QueueNotPaused, QueuePauses
from queue_core.postgres import PostgresStore

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
ALICE = UUID("00000000-0000-0000-0000-00000000a11c")
BOB = UUID("00000000-0000-0000-0000-000000000b0b")


def enqueue(store: PostgresStore, n: int, *, queue: str = "default", at=T0, **options) -> list:
    specs = [job_spec("embed", {"i": i}, queue=queue, **options) for i in range(n)]
    return [r.id for r in store.enqueue_many(specs, now=at)]


def kill(
    store: PostgresStore, n: int, *, at=T0, error: str = "boom", queue: str = "default", **options
) -> list:
    """n jobs that go dead on their only attempt at `at`."""
    ids = enqueue(store, n, queue=queue, at=at - timedelta(seconds=1), max_attempts=1, **options)
    for job in store.claim(queues=[queue], limit=n, now=at):
        store.fail(job, error, now=at)
    return ids


# Paused queues


def test_a_paused_queue_is_not_claimed_and_still_takes_jobs(conn):
    # Given a paused default queue
    store = PostgresStore(conn)
    pause = QueuePauses(conn).pause("default", by="olivia", reason="API down", now=T0)
    assert (pause.queue, pause.paused_by, pause.paused_at) == ("default", "olivia", T0)

    # When jobs are enqueued into it and into another queue, and a worker claims both
    enqueue(store, 2)
    enqueue(store, 1, queue="bulk")
    claimed = PostgresStore(conn).claim(queues=["default", "bulk"], limit=10, now=T0)

    # Then only the other queue's job is claimed; the paused ones stay queued
    assert [j.queue for j in claimed] == ["bulk"]
    assert PostgresStore(conn).claim(limit=10, now=T0) == []
    statuses = conn.execute("select status, count(*) from tickq.jobs group by 1 order by 1")
    assert statuses.fetchall() == [("queued", 2), ("running", 1)]


def test_resuming_lets_the_next_claim_take_the_jobs(conn):
    pauses = QueuePauses(conn)
    pauses.pause("default", by="olivia", now=T0)
    store = PostgresStore(conn)
    enqueue(store, 2)
    assert PostgresStore(conn).claim(limit=10, now=T0) == []

    resumed = pauses.resume("default")

    assert resumed.paused_by == "olivia"
    assert len(PostgresStore(conn).claim(limit=10, now=T0)) == 2
    with pytest.raises(QueueNotPaused):
        pauses.resume("default")


def test_a_worker_sees_a_pause_once_its_probe_expires(conn):
    # Given a worker that has already looked at the paused set
    store = PostgresStore(conn)
    store.paused.ttl_seconds = 0.0  # every claim reads the set again
    enqueue(store, 3)
    assert len(store.claim(limit=1, now=T0)) == 1

    # When an operator pauses the queue on another connection
    QueuePauses(conn).pause("default", by="olivia")

    # Then the worker's next claim takes nothing
    assert store.claim(limit=10, now=T0) == []


def test_pausing_twice_keeps_the_first_pause(conn):
    pauses = QueuePauses(conn)
    pauses.pause("default", by="olivia", now=T0)
    again = pauses.pause("default", by="oscar", now=T0 + timedelta(minutes=1))
    assert (again.paused_by, again.paused_at) == ("olivia", T0)
    assert [p.queue for p in pauses.all()] == ["default"]


@pytest.mark.parametrize(
    ("queue", "by", "reason"),
    [("", "o", None), ("bad queue", "o", None), ("q", "", None), ("q", "o", "x" * 501)],
)
def test_bad_pause_input_is_refused_and_changes_nothing(conn, queue, by, reason):
    with pytest.raises(InvalidJob):
        QueuePauses(conn).pause(queue, by=by, reason=reason)
    assert QueuePauses(conn).all() == []


# Charts


def test_throughput_counts_successes_retried_failures_and_dead_per_minute(conn):
    store = PostgresStore(conn)
    # Given, in the minute at T0: two successes, one of them after a retried failure
    enqueue(store, 2, at=T0 - timedelta(seconds=5), max_attempts=2)
    first, second = store.claim(limit=2, now=T0 - timedelta(seconds=4))
    store.complete(first, {"ok": 1}, now=T0 + timedelta(seconds=10))
    store.fail(second, "flaky", now=T0 + timedelta(seconds=11))
    (again,) = store.claim(limit=1, now=T0 + timedelta(seconds=40))
    store.complete(again, None, now=T0 + timedelta(seconds=50))
    # and in the next minute one dead job (its only failure counts as dead, not retried)
    kill(store, 1, at=T0 + timedelta(seconds=70))

    # When the per-minute chart is read at T0 + 2 min
    buckets = QueueHistory(conn).throughput("hour", now=T0 + timedelta(minutes=2))

    # Then there are 60 minutes, and these two hold the counts
    assert len(buckets) == 60
    counts = {b.start: (b.succeeded, b.failed, b.dead) for b in buckets if b.start >= T0}
    assert counts == {
        T0: (2, 1, 0),
        T0 + timedelta(minutes=1): (0, 0, 1),
        T0 + timedelta(minutes=2): (0, 0, 0),
    }
    day = QueueHistory(conn).throughput("day", now=T0 + timedelta(minutes=2))
    assert len(day) == 24
    assert (day[-1].start, day[-1].succeeded, day[-1].failed, day[-1].dead) == (T0, 2, 1, 1)


def test_throughput_counts_failures_of_jobs_still_retrying(conn):
    store = PostgresStore(conn)
    enqueue(store, 1, at=T0 - timedelta(seconds=5), max_attempts=3)
    (job,) = store.claim(limit=1, now=T0)
    store.fail(job, "flaky", now=T0 + timedelta(seconds=1))

    (bucket,) = [
        b
        for b in QueueHistory(conn).throughput("hour", now=T0 + timedelta(seconds=30))
        if b.start == T0
    ]

    assert (bucket.succeeded, bucket.failed, bucket.dead) == (0, 1, 0)


def test_throughput_of_one_queue_leaves_the_others_out(conn):
    store = PostgresStore(conn)
    kill(store, 1, at=T0 + timedelta(seconds=1))
    enqueue(store, 1, queue="bulk", at=T0)
    (job,) = store.claim(queues=["bulk"], limit=1, now=T0)
    store.complete(job, None, now=T0 + timedelta(seconds=2))

    at = T0 + timedelta(seconds=30)
    bulk = [b for b in QueueHistory(conn).throughput("hour", queue="bulk", now=at) if b.start == T0]
    assert [(b.succeeded, b.dead) for b in bulk] == [(1, 0)]


def test_depth_samples_keep_their_own_retention(conn):
    store = PostgresStore(conn)
    history = QueueHistory(conn)
    enqueue(store, 3, at=T0 - timedelta(minutes=1))
    store.claim(limit=1, now=T0)

    # When the maintenance pass samples twice, two days apart
    history.record_depth(store.stats(now=T0), now=T0)
    later = T0 + timedelta(days=2, seconds=1)
    history.record_depth(store.stats(now=later), now=later)

    # Then the first sample is gone and the second holds depth, running and the oldest age
    kept = conn.execute("select count(*) from tickq.queue_depth_samples").fetchone()
    assert kept == (1,)
    (sample,) = history.depth("day", now=later)
    assert (sample.sampled_at, sample.queue, sample.depth, sample.running) == (
        later,
        "default",
        2,
        1,
    )
    assert sample.oldest_runnable_seconds == pytest.approx(2 * 86_400 + 61)


def test_the_finished_counts_read_indexes_not_the_table(conn):
    """The plan of tickq.throughput's reads, on a table big enough for the planner to care."""
    conn.execute(
        "insert into tickq.jobs (queue, type, status, finished_at, errors)"
        " select 'default', 'embed', 'succeeded', now() - interval '2 days', '[]'"
        " from generate_series(1, 20000)"
    )
    conn.execute("analyze tickq.jobs")
    body = conn.execute("select prosrc from pg_proc where proname = 'throughput'").fetchone()[0]
    query = (
        body.replace("p_since", "(now() - interval '1 hour')")
        .replace("p_bucket_seconds", "60")
        .replace("p_queue", "null::text")
        .replace("p_now", "null::timestamptz")
    )
    plan = "\n".join(r[0] for r in conn.execute("explain " + query).fetchall())
    # The rows finished two days ago, before the day partitions made ahead: in the default
    # partition of finished jobs, read through its copies of the finished jobs' indexes.
    # (Empty partitions are scanned, at no cost.)
    assert "Seq Scan on jobs_done_default" not in plan, plan
    for index in ("jobs_finished_idx", "jobs_failed_finished_idx"):
        (copy,) = conn.execute(
            "select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid"
            " join pg_index x on x.indexrelid = c.oid"
            " where i.inhparent = ('tickq.' || %s)::regclass"
            " and x.indrelid = 'tickq.jobs_done_default'::regclass",
            (index,),
        ).fetchone()
        assert copy in plan, plan


# Bulk actions


def test_users_act_only_on_their_own_jobs(conn, app_login_url):
    app = psycopg.connect(app_login_url, autocommit=True)
    alice = PostgresStore(app, user_id=ALICE)
    bob = PostgresStore(app, user_id=BOB)
    mine = kill(PostgresStore(conn), 2, user_id=ALICE)
    theirs = kill(PostgresStore(conn), 1, user_id=BOB)

    results = act_as_user(alice, BulkAction.RETRY, [*mine, *theirs, uuid4()])

    assert [r.outcome for r in results] == ["retried", "retried", "not found", "not found"]
    assert bob.get(theirs[0]).status == "dead"
    (again,) = act_as_user(alice, BulkAction.RETRY, mine[:1])
    assert (again.id, again.outcome, again.status) == (mine[0], "not retryable", "queued")
    assert again.reason is not None and "queued" in again.reason
    cancelled = act_as_user(alice, BulkAction.CANCEL, mine)
    assert [r.outcome for r in cancelled] == ["cancelled", "cancelled"]
    app.close()


def test_operators_act_on_every_users_jobs_and_say_what_happened(conn):
    store = PostgresStore(conn)
    dead = kill(store, 1, user_id=ALICE) + kill(store, 1, user_id=BOB) + kill(store, 1)
    (waiting,) = enqueue(store, 1, user_id=BOB)
    console = OperatorConsole(conn)

    retried = console.act(BulkAction.RETRY, [*dead, waiting], now=T0)
    cancelled = console.act(BulkAction.CANCEL, [waiting, dead[0], uuid4()], now=T0)

    assert [(r.outcome, r.status) for r in retried] == [("retried", "queued")] * 3 + [
        ("not retryable", "queued")
    ]
    assert [r.outcome for r in cancelled] == ["cancelled", "cancelled", "not found"]


def test_retry_all_dead_needs_the_confirmed_count(conn):
    store = PostgresStore(conn)
    kill(store, 2, user_id=ALICE)
    kill(store, 1, queue="bulk")
    console = OperatorConsole(conn)
    assert console.count_dead(types=["embed"], queues=["default"]) == 2

    with pytest.raises(CountChanged) as stale:
        console.retry_dead(types=["embed"], queues=["default"], expected=3)
    assert stale.value.current == 2
    assert console.count_dead(types=None, queues=None) == 3  # nothing changed

    results = console.retry_dead(types=["embed"], queues=["default"], expected=2)
    assert [r.outcome for r in results] == ["retried", "retried"]
    assert console.count_dead(types=None, queues=None) == 1


def test_operator_list_filters_by_error_text_and_creation_time_and_shows_no_payload(conn):
    store = PostgresStore(conn)
    kill(store, 1, error="TimeoutError: speech API", user_id=ALICE)
    kill(store, 1, error="KeyError: 'doc'", user_id=BOB, at=T0 + timedelta(hours=1))

    found = OperatorConsole(conn).jobs(JobFilter.of(error="timeout"))
    later = OperatorConsole(conn).jobs(JobFilter.of(created_from=T0 + timedelta(minutes=30)))

    assert [j["error"] for j in found.jobs] == ["TimeoutError: speech API"]
    assert "payload" not in found.jobs[0] and "result" not in found.jobs[0]
    assert [j["error"] for j in later.jobs] == ["KeyError: 'doc'"]


def test_a_user_search_pages_through_their_own_jobs(conn, app_login_url):
    enqueue(PostgresStore(conn), 3, user_id=ALICE)
    enqueue(PostgresStore(conn), 2, user_id=BOB)
    app = psycopg.connect(app_login_url, autocommit=True)
    alice = PostgresStore(app, user_id=ALICE)

    first = alice.search_jobs(JobFilter.of(statuses=["queued"]).params(), limit=2)
    rest = alice.search_jobs(JobFilter.of().params(), limit=2, cursor=first.next_cursor)

    assert len(first.jobs) == 2 and len(rest.jobs) == 1 and rest.next_cursor is None
    assert {j.user_id for j in first.jobs + rest.jobs} == {ALICE}
    app.close()


def test_an_operator_login_reads_no_job_row_but_may_use_the_console(conn, operator_url):
    kill(PostgresStore(conn), 1, user_id=ALICE)
    with psycopg.connect(operator_url, autocommit=True) as operator:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            operator.execute("select * from tickq.jobs")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            operator.execute("insert into tickq.queue_pauses values ('q', 'me')")
        assert OperatorConsole(operator).count_dead(types=None, queues=None) == 1
        QueuePauses(operator).pause("default", by="olivia")
        assert [p.queue for p in QueuePauses(operator).all()] == ["default"]


def test_an_operator_login_sets_and_holds_flow_keys_and_sees_what_holds_a_job(conn, operator_url):
    job = PostgresStore(conn).enqueue(job_spec("embed", {}, flow_keys=["shop:a"], user_id=ALICE))
    with psycopg.connect(operator_url, autocommit=True) as operator:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            operator.execute("insert into tickq.flow_holds (key, until) values ('k', now())")
        limits = FlowLimits(operator)
        limits.set(flow_limit("shop:", max_running=1))
        limits.hold("shop:a", 60)
        keys = limits.keys_now()
        prefixes = [limit.prefix for limit in limits.limits()]
        with as_operator(operator) as acting:
            detail = OperatorConsole(acting).job(job.id)

    assert prefixes == ["shop:"]
    assert [(k["key"], k["waiting"], k["prefix"]) for k in keys] == [("shop:a", 1, "shop:")]
    assert detail["held_by_flow_key"] == "shop:a"


def test_the_lists_filter_by_fairness_group(conn, app_login_url):
    store = PostgresStore(conn)
    enqueue(store, 2, user_id=ALICE, group="tenant-a")
    enqueue(store, 1, user_id=ALICE, group="tenant-b")
    enqueue(store, 1, user_id=BOB, group="tenant-a")
    app = psycopg.connect(app_login_url, autocommit=True)
    alice = PostgresStore(app, user_id=ALICE)

    mine = alice.search_jobs(JobFilter.of(groups=["tenant-a"]).params()).jobs
    everyone = OperatorConsole(conn).jobs(JobFilter.of(groups=["tenant-a"])).jobs

    assert [(j.user_id, j.group_key) for j in mine] == [(ALICE, "tenant-a")] * 2
    assert sorted(j["user_id"] for j in everyone) == sorted([str(ALICE)] * 2 + [str(BOB)])
    assert {j["group_key"] for j in everyone} == {"tenant-a"}
    app.close()


def test_operators_cancel_a_parent_with_its_waiting_children(conn):
    import queue_core

    parent = queue_core.enqueue(conn, "extract", {"doc": "a.pdf"}, user_id=ALICE).id
    child = queue_core.enqueue(conn, "embed", {}, after=[parent], user_id=ALICE).id
    console = OperatorConsole(conn)

    (cancelled,) = console.act(BulkAction.CANCEL, [parent])
    (blocked,) = console.act(BulkAction.RETRY, [child])

    assert (cancelled.outcome, cancelled.status) == ("cancelled", "cancelled")
    assert PostgresStore(conn).get(child).status == "cancelled"
    # The child may not run while its parent has not succeeded
    assert (blocked.outcome, blocked.status) == ("parents unfinished", "cancelled")
