"""Retention policies and pruning in bounded batches against a real database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from queue_core.errors import InvalidJob
from queue_core.policies.retention import PolicyNotFound, Retention, parse_age, policy
from tickq.infra.cli.program import main

NOW = datetime(2030, 6, 1, tzinfo=UTC)


def finished(conn, n: int, *, status="succeeded", type_="t", queue="default", age_days=0.0, at=NOW):
    """Insert n finished jobs that finished `age_days` before `at`, one second apart."""
    conn.execute(
        "insert into tickq.jobs (type, queue, status, finished_at, idempotency_key)"
        " select %s, %s, %s, %s - g * interval '1 second', %s || g"
        " from generate_series(1, %s) g",
        (type_, queue, status, at - timedelta(days=age_days), f"{type_}-{status}-{age_days}-", n),
    )


def count(conn, **where: str) -> int:
    clause = " and ".join(f"{k} = %({k})s" for k in where) or "true"
    return conn.execute(f"select count(*) from tickq.jobs where {clause}", where).fetchone()[0]


def test_max_age_deletes_older_finished_jobs_and_keeps_dead_ones(conn):
    Retention(conn).set(policy(max_age="7d"))
    finished(conn, 5, age_days=10)
    finished(conn, 4, age_days=1)
    finished(conn, 3, status="cancelled", age_days=10)
    finished(conn, 2, status="dead", age_days=30)

    report = Retention(conn).prune(now=NOW)

    assert (report.deleted, report.by_status) == (8, {"succeeded": 5, "cancelled": 3})
    assert count(conn, status="succeeded") == 4
    assert count(conn, status="dead") == 2


def test_keep_last_keeps_the_newest_n_in_scope(conn):
    Retention(conn).set(policy(keep_last=3))
    finished(conn, 10)
    newest = conn.execute(
        "select id from tickq.jobs order by finished_at desc, id desc limit 3"
    ).fetchall()

    Retention(conn).prune(now=NOW)

    assert conn.execute("select id from tickq.jobs order by finished_at desc").fetchall() == newest


def test_waiting_and_running_jobs_are_never_pruned(conn):
    Retention(conn).set(policy(keep_last=0, statuses=["succeeded", "cancelled", "dead"]))
    conn.execute("insert into tickq.jobs (type) values ('t')")
    conn.execute(
        "insert into tickq.jobs (type, status, attempts, lease_token, lease_until)"
        " values ('t', 'running', 1, gen_random_uuid(), now())"
    )
    finished(conn, 3, status="dead")
    assert Retention(conn).prune(now=NOW).deleted == 3
    assert count(conn) == 2


def test_the_most_specific_policy_governs_a_job(conn):
    retention = Retention(conn)
    retention.set(policy(max_age="1d"))  # everything else: one day
    retention.set(policy(type="audit", max_age="365d"))  # audit jobs: a year
    retention.set(policy(queue="bulk", keep_last=0, statuses=["succeeded", "dead"]))
    finished(conn, 2, type_="audit", age_days=30)
    finished(conn, 2, type_="mail", age_days=30)
    finished(conn, 2, type_="mail", queue="bulk", status="dead")

    report = retention.prune(now=NOW)

    assert count(conn, type="audit") == 2
    assert count(conn, type="mail") == 0
    assert report.by_policy == {"queue=bulk": 2, "all jobs": 2}


def test_pruning_runs_in_bounded_batches_and_stops_when_asked(conn):
    Retention(conn).set(policy(max_age="1d"))
    finished(conn, 55, age_days=2)
    retention = Retention(conn)

    partial = retention.prune(batch_size=10, max_batches=3, now=NOW)
    assert (partial.deleted, partial.batches, partial.complete) == (30, 3, False)

    rest = retention.prune(batch_size=10, now=NOW)
    assert (rest.deleted, rest.batches, rest.complete) == (25, 3, True)
    assert count(conn) == 0


def test_dry_run_counts_and_changes_nothing(conn):
    Retention(conn).set(policy(keep_last=2))
    finished(conn, 7)
    report = Retention(conn).prune(dry_run=True, now=NOW)
    assert (report.dry_run, report.deleted, report.batches) == (True, 5, 0)
    assert count(conn) == 7


def test_jobs_finishing_between_pruning_batches_are_kept_and_the_newest_n_survive(conn, connect):
    """Another connection commits newer finished jobs before every batch but the first (the
    prune's own hook), so each batch must re-read the keep_last cutoff to keep them."""
    Retention(conn).set(policy(keep_last=50))
    finished(conn, 2000, age_days=1)
    other = connect()
    per_batch, arrivals, calls = 30, 10, [0]

    def arrive_then_continue() -> bool:
        calls[0] += 1  # called before each batch: calls 2..11 follow batches 1..10
        wave = calls[0] - 2
        if 0 <= wave < arrivals:
            other.execute(
                "insert into tickq.jobs (type, status, finished_at)"
                " select 't', 'succeeded', %s + g * interval '1 second'"
                " from generate_series(1, %s) g",
                (NOW + timedelta(seconds=wave * per_batch), per_batch),
            )
        return True

    report = Retention(conn).prune(
        batch_size=100, should_continue=arrive_then_continue, now=NOW + timedelta(days=1)
    )

    assert report.batches > arrivals  # every wave landed between two batches
    newest = conn.execute(
        "select count(*) from tickq.jobs where finished_at > %s",
        (NOW + timedelta(seconds=arrivals * per_batch - 50),),
    ).fetchone()[0]
    assert count(conn) == 50
    assert newest == 50


def test_the_idempotency_key_of_a_succeeded_job_frees_up_once_it_is_pruned(conn):
    from queue_core.model.validation import job_spec
    from queue_core.postgres import PostgresStore

    store = PostgresStore(conn)
    first = store.enqueue(job_spec("t", idempotency_key="k"))
    conn.execute("update tickq.jobs set status = 'succeeded', finished_at = %s", (NOW,))
    assert store.enqueue(job_spec("t", idempotency_key="k")).duplicate

    Retention(conn).set(policy(keep_last=0))
    Retention(conn).prune(now=NOW)

    again = store.enqueue(job_spec("t", idempotency_key="k"))
    assert not again.duplicate and again.id != first.id


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"max_age": "soon"},
        {"max_age": -1},
        {"keep_last": -1},
        {"keep_last": 1, "statuses": ["queued"]},
        {"keep_last": 1, "statuses": []},
        {"keep_last": 1, "queue": "bad queue"},
    ],
)
def test_bad_policies_are_refused_and_nothing_is_written(conn, options):
    with pytest.raises(InvalidJob):
        Retention(conn).set(policy(**options))
    assert Retention(conn).policies() == []


def test_ages_are_parsed():
    assert parse_age("30d") == 30 * 86_400
    assert parse_age("12h") == 43_200
    assert parse_age("90m") == 5_400
    assert parse_age(45) == 45


def test_policies_are_replaced_per_scope_and_cleared(conn):
    retention = Retention(conn)
    retention.set(policy(type="t", keep_last=5))
    retention.set(policy(type="t", keep_last=9))
    assert [(p.type, p.keep_last) for p in retention.policies()] == [("t", 9)]
    retention.clear(type="t")
    with pytest.raises(PolicyNotFound):
        retention.clear(type="t")


def test_cli_sets_policies_and_prunes_with_dry_run(conn, database_url, monkeypatch, capsys):
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    finished(conn, 4, age_days=40, at=datetime.now(UTC))
    assert main(["retention", "set", "--max-age", "30d"]) == 0
    assert main(["retention", "set", "--max-age", "later"]) == 2
    capsys.readouterr()
    assert main(["prune", "--dry-run"]) == 0
    assert "would delete 4 jobs" in capsys.readouterr().out
    assert count(conn) == 4
    assert main(["--json", "prune", "--batch-size", "3"]) == 0
    assert '"deleted": 4' in capsys.readouterr().out
    assert count(conn) == 0
