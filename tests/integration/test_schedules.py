"""Cron schedules against a real database: management, dedup under concurrent runs, DST."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest

from queue_core.errors import InvalidJob
from queue_core.policies.schedules import Missed, ScheduleExists, ScheduleNotFound, Schedules
from tickq.infra.cli.program import main


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def jobs_of(conn, name: str) -> list[tuple[str, str]]:
    rows = conn.execute(
        "select idempotency_key, status from tickq.jobs where idempotency_key like %s"
        " order by idempotency_key",
        (f"cron:{name}:%",),
    )
    return [(key, status) for key, status in rows]


def test_a_schedule_fires_from_its_next_occurrence_not_retroactively(conn):
    schedules = Schedules(conn)
    created = schedules.add("hourly", "0 * * * *", "report", {"k": 1}, now=utc(2030, 1, 1, 8, 30))
    assert created.next_at == utc(2030, 1, 1, 9)

    assert schedules.run(now=utc(2030, 1, 1, 8, 59)).fired == 0
    report = schedules.run(now=utc(2030, 1, 1, 9, 0, 10))

    assert report.fired == 1
    [job] = conn.execute("select type, payload, idempotency_key from tickq.jobs").fetchall()
    assert job == ("report", {"k": 1}, "cron:hourly:2030-01-01T09:00:00Z")
    assert schedules.get("hourly").last_fired == utc(2030, 1, 1, 9)
    assert schedules.get("hourly").next_at == utc(2030, 1, 1, 10)


def test_repeated_runs_never_fire_an_occurrence_twice(conn):
    schedules = Schedules(conn)
    schedules.add("m", "*/5 * * * *", "t", now=utc(2030, 1, 1, 0, 1))
    for minute in range(5, 30):
        for _ in range(3):
            schedules.run(now=utc(2030, 1, 1, 0, minute, 20))
    assert [k for k, _ in jobs_of(conn, "m")] == [
        f"cron:m:2030-01-01T00:{m:02d}:00Z" for m in (5, 10, 15, 20, 25)
    ]


def test_four_concurrent_scheduler_runs_enqueue_each_occurrence_once(conn, connect):
    setup = Schedules(conn)
    for i in range(6):
        setup.add(f"s{i}", "* * * * *", "t", now=utc(2030, 1, 1, 0, 0, 30))
    runs = 4
    barrier = threading.Barrier(runs)
    reports = []
    errors: list[BaseException] = []

    def run(minute: int) -> None:
        try:
            schedules = Schedules(connect())
            barrier.wait(timeout=30)
            reports.append(schedules.run(now=utc(2030, 1, 1, 0, minute, 5)))
        except BaseException as exc:
            errors.append(exc)

    for minute in (1, 2, 3):
        threads = [threading.Thread(target=run, args=(minute,)) for _ in range(runs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)

    assert not errors
    rows = conn.execute("select idempotency_key from tickq.jobs").fetchall()
    keys = [key for (key,) in rows]
    assert len(keys) == len(set(keys)) == 6 * 3
    assert sum(r.fired for r in reports) == 18


def test_an_occurrence_whose_job_died_or_was_deleted_does_not_fire_again(conn):
    schedules = Schedules(conn)
    schedules.add("d", "0 8 * * *", "t", now=utc(2030, 1, 1))
    schedules.run(now=utc(2030, 1, 1, 8, 0, 30))
    # The key is free again once the job is dead, and gone once it is pruned.
    conn.execute("update tickq.jobs set status = 'dead', finished_at = now()")
    schedules.run(now=utc(2030, 1, 1, 8, 1))
    conn.execute("delete from tickq.jobs")
    schedules.run(now=utc(2030, 1, 1, 8, 2))
    assert conn.execute("select count(*) from tickq.jobs").fetchone()[0] == 0


def test_after_downtime_latest_policy_fires_the_latest_missed_occurrence_once(conn):
    schedules = Schedules(conn)
    schedules.add("l", "0 * * * *", "t", now=utc(2030, 1, 1, 0, 30))
    report = schedules.run(now=utc(2030, 1, 1, 5, 40))  # 01:00 .. 05:00 passed unseen

    assert (report.fired, report.passed_over) == (1, 1)
    assert jobs_of(conn, "l") == [("cron:l:2030-01-01T05:00:00Z", "queued")]


def test_after_downtime_skip_policy_fires_nothing_and_waits_for_the_next_occurrence(conn):
    schedules = Schedules(conn)
    schedules.add("k", "0 * * * *", "t", missed=Missed.SKIP, now=utc(2030, 1, 1, 0, 30))
    report = schedules.run(now=utc(2030, 1, 1, 5, 40))
    assert (report.fired, report.skipped) == (0, 1)
    assert schedules.get("k").next_at == utc(2030, 1, 1, 6)

    schedules.run(now=utc(2030, 1, 1, 6, 0, 40))
    assert jobs_of(conn, "k") == [("cron:k:2030-01-01T06:00:00Z", "queued")]


def test_new_york_daily_job_across_both_dst_transitions(conn):
    schedules = Schedules(conn)
    schedules.add("ny", "30 1 * * *", "t", timezone="America/New_York", now=utc(2026, 3, 6))
    at = utc(2026, 3, 6)
    while at < utc(2026, 3, 10):
        at += timedelta(minutes=30)
        schedules.run(now=at)
    schedules.add(
        "ny", "30 1 * * *", "t", timezone="America/New_York", replace=True, now=utc(2026, 10, 30)
    )
    at = utc(2026, 10, 30)
    while at < utc(2026, 11, 3):
        at += timedelta(minutes=30)
        schedules.run(now=at)
    assert [k for k, _ in jobs_of(conn, "ny")] == [
        "cron:ny:2026-03-06T06:30:00Z",  # 01:30 EST
        "cron:ny:2026-03-07T06:30:00Z",
        "cron:ny:2026-03-08T06:30:00Z",  # the jump is at 02:00, after 01:30 EST
        "cron:ny:2026-03-09T05:30:00Z",  # 01:30 EDT
        "cron:ny:2026-10-30T05:30:00Z",
        "cron:ny:2026-10-31T05:30:00Z",
        "cron:ny:2026-11-01T05:30:00Z",  # 01:30 EDT; the repeated 01:30 EST does not fire
        "cron:ny:2026-11-02T06:30:00Z",
    ]


def test_tokyo_schedule_fires_at_0800_jst(conn):
    schedules = Schedules(conn)
    schedules.add("tokyo", "0 8 * * *", "t", timezone="Asia/Tokyo", now=utc(2030, 7, 1))
    schedules.run(now=utc(2030, 7, 1, 23, 0, 5))
    assert jobs_of(conn, "tokyo") == [("cron:tokyo:2030-07-01T23:00:00Z", "queued")]


def test_disabled_schedules_do_not_fire_and_restart_at_the_next_occurrence(conn):
    schedules = Schedules(conn)
    schedules.add("x", "0 * * * *", "t", now=utc(2030, 1, 1))
    schedules.disable("x")
    assert schedules.run(now=utc(2030, 1, 1, 3, 1)).due == 0
    enabled = schedules.enable("x", now=utc(2030, 1, 1, 3, 1))
    assert enabled.next_at == utc(2030, 1, 1, 4)
    assert conn.execute("select count(*) from tickq.jobs").fetchone()[0] == 0


@pytest.mark.parametrize(
    ("cron", "zone", "field"),
    [("61 * * * *", "UTC", "cron"), ("0 8 * *", "UTC", "cron"), ("0 8 * * *", "Tokyo", "timezone")],
)
def test_bad_expressions_or_zones_are_refused_and_nothing_is_written(conn, cron, zone, field):
    with pytest.raises(InvalidJob) as refused:
        Schedules(conn).add("bad", cron, "t", timezone=zone)
    assert refused.value.field == field
    assert conn.execute("select count(*) from tickq.schedules").fetchone()[0] == 0


def test_names_are_unique_unless_replaced_and_removal_is_checked(conn):
    schedules = Schedules(conn)
    schedules.add("a", "0 8 * * *", "t")
    with pytest.raises(ScheduleExists):
        schedules.add("a", "0 9 * * *", "t")
    assert schedules.add("a", "0 9 * * *", "t", replace=True).cron == "0 9 * * *"
    schedules.remove("a")
    with pytest.raises(ScheduleNotFound):
        schedules.remove("a")


def test_a_schedule_into_a_full_queue_fails_alone_and_retries_next_run(conn):
    from queue_core.policies.limits import Limits, queue_limit

    Limits(conn).set_queue(queue_limit("full", max_depth=1))
    schedules = Schedules(conn)
    schedules.add("blocked", "* * * * *", "t", queue="full", now=utc(2030, 1, 1))
    schedules.add("free", "* * * * *", "t", now=utc(2030, 1, 1))
    conn.execute("insert into tickq.jobs (queue, type) values ('full', 'filler')")

    report = schedules.run(now=utc(2030, 1, 1, 0, 1, 5))

    assert (report.fired, report.failed) == (1, 1)
    assert "is full" in report.errors["blocked"]
    assert schedules.get("blocked").next_at == utc(2030, 1, 1, 0, 1)


def test_cli_manages_and_runs_schedules(conn, database_url, monkeypatch, capsys):
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    assert main(["schedules", "add", "nightly", "0 3 * * *", "backup", "--tz", "Asia/Tokyo"]) == 0
    assert main(["schedules", "add", "oops", "0 3 * * *", "backup", "--tz", "Nowhere/City"]) == 2
    assert "not an IANA time zone" in capsys.readouterr().err
    assert main(["schedules", "run", "--now", "2099-01-01T00:00:00+00:00"]) == 0
    assert main(["--json", "schedules", "list"]) == 0
    listed = capsys.readouterr().out
    assert '"last_fired": "2098-12-31T18:00:00+00:00"' in listed
    assert main(["schedules", "disable", "nightly"]) == 0
    assert main(["schedules", "remove", "nightly"]) == 0
    assert main(["schedules", "remove", "nightly"]) == 1


def test_an_occurrence_is_advanced_in_the_transaction_that_enqueues_its_job(conn):
    # Given a due schedule whose advance past the occurrence fails (a trigger refuses it, as
    # a lost connection or a statement timeout would stop it)
    schedules = Schedules(conn)
    schedules.add("a", "0 8 * * *", "t", now=utc(2030, 1, 1))
    conn.execute(
        """
        create function public.schedules_refuse() returns trigger language plpgsql as $$
        begin raise exception 'advance refused'; end $$;
        create trigger schedules_refuse before update on tickq.schedules
            for each row execute function public.schedules_refuse();
        """
    )
    try:
        report = schedules.run(now=utc(2030, 1, 1, 8, 0, 30))
    finally:
        conn.execute(
            "drop trigger schedules_refuse on tickq.schedules;"
            " drop function public.schedules_refuse()"
        )

    # Then the run failed on that schedule, and the occurrence's job went with the advance
    assert report.failed == 1 and "advance refused" in report.errors["a"]
    assert jobs_of(conn, "a") == []
    # And the next run fires the occurrence once, even though a job of it that ended dead
    # would no longer hold its key
    conn.execute("update tickq.jobs set status = 'dead', finished_at = now()")
    assert schedules.run(now=utc(2030, 1, 1, 8, 1)).fired == 1
    conn.execute("update tickq.jobs set status = 'dead', finished_at = now()")
    assert schedules.run(now=utc(2030, 1, 1, 8, 2)).fired == 0
    assert jobs_of(conn, "a") == [("cron:a:2030-01-01T08:00:00Z", "dead")]


# Flow keys


def fired_keys(conn) -> list[list[str]]:
    rows = conn.execute("select flow_keys from tickq.jobs order by created_at, id")
    return [list(row[0]) for row in rows]


def test_a_schedules_flow_keys_are_stored_and_go_on_every_job_it_fires(conn):
    schedules = Schedules(conn)
    made = schedules.add(
        "sync", "0 * * * *", "sync", flow_keys=["shop:a", "api:x"], now=utc(2030, 1, 1, 8, 30)
    )

    assert made.flow_keys == ("shop:a", "api:x")
    assert schedules.get("sync").as_dict()["flow_keys"] == ["shop:a", "api:x"]
    schedules.run(now=utc(2030, 1, 1, 9))
    schedules.run(now=utc(2030, 1, 1, 10))
    assert fired_keys(conn) == [["shop:a", "api:x"], ["shop:a", "api:x"]]


def test_a_fired_job_carries_its_tasks_templates_then_the_schedules_keys(conn):
    from queue_core import Registry
    from queue_core.postgres.catalog import publish

    tasks = Registry()

    @tasks.task("sync", flow_keys=["shop:{shop}"])
    def sync(job):
        return None

    publish(conn, tasks)
    schedules = Schedules(conn)
    schedules.add(
        "s", "0 * * * *", "sync", {"shop": "acme"}, flow_keys=["api:x"], now=utc(2030, 1, 1, 8)
    )
    schedules.run(now=utc(2030, 1, 1, 9))

    assert fired_keys(conn) == [["shop:acme", "api:x"]]
    with pytest.raises(InvalidJob, match="'shop'"):  # a template the payload cannot fill
        schedules.add("t", "0 * * * *", "sync", {}, now=utc(2030, 1, 1, 8))
    with pytest.raises(InvalidJob, match="at most 8"):  # 8 given and 1 from the template
        schedules.add(
            "u", "0 * * * *", "sync", {"shop": "a"}, flow_keys=[f"k{i}" for i in range(8)]
        )
    assert [s.name for s in schedules.all()] == ["s"]


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        ([f"k{i}" for i in range(9)], "at most 8"),
        (["has space"], "characters of"),
        (["x" * 201], "1-200"),
        ([""], "1-200"),
        ("shop:a", "must be a list"),
        ([7], "must be a string"),
    ],
)
def test_bad_flow_keys_of_a_schedule_are_refused_and_nothing_written(conn, keys, says):
    with pytest.raises(InvalidJob, match=says):
        Schedules(conn).add("s", "0 * * * *", "sync", flow_keys=keys)

    assert Schedules(conn).all() == []


def test_the_table_refuses_a_schedules_bad_flow_keys(conn):
    import psycopg

    for bad in (
        "array['has space']",
        "array['" + "x" * 201 + "']",
        "array_fill('k'::text, array[9])",
    ):
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(
                "insert into tickq.schedules (name, cron, type, next_at, flow_keys)"
                f" values ('s', '* * * * *', 't', now(), {bad})"
            )


def test_cli_adds_a_schedule_with_flow_keys_lists_them_and_fires_them(
    conn, database_url, monkeypatch, capsys
):
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    add = ["schedules", "add", "s", "0 3 * * *", "sync", "--flow-key", "shop:a", "--flow-key", "x"]
    assert main(add) == 0
    capsys.readouterr()
    assert main(["schedules", "add", "bad", "0 3 * * *", "sync", "--flow-key", "no spaces"]) == 2
    assert "flow key" in capsys.readouterr().err

    assert main(["--json", "schedules", "list"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert main(["schedules", "list"]) == 0
    table = capsys.readouterr().out
    assert main(["schedules", "run", "--now", "2099-01-01T04:00:00+00:00"]) == 0

    assert [(s["name"], s["flow_keys"]) for s in listed] == [("s", ["shop:a", "x"])]
    assert "shop:a x" in table
    assert fired_keys(conn) == [["shop:a", "x"]]
