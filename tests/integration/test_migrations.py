"""Migrations: applied once each, recorded, and safe when two processes race on a new database."""

from __future__ import annotations

import subprocess
import sys
import threading

import psycopg
import pytest

from queue_core.migrate import Migration, available, migrate, pending

MIGRATE_IN_A_PROCESS = """
import sys, psycopg
from queue_core.migrate import migrate
with psycopg.connect(sys.argv[1]) as conn:
    print(",".join(migrate(conn)))
"""


def _recorded(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("select version from tickq.schema_migrations order by version")
        return [version for (version,) in rows]


def test_migrate_on_a_fresh_database_applies_every_migration_in_order(
    fresh_database_url: str,
) -> None:
    versions = [m.version for m in available()]

    with psycopg.connect(fresh_database_url) as conn:
        before = pending(conn)
        applied = migrate(conn)
        after = pending(conn)

    assert before == versions == sorted(versions)
    assert applied == versions
    assert after == []
    assert _recorded(fresh_database_url) == versions


def test_migrate_a_second_time_changes_nothing(fresh_database_url: str) -> None:
    with psycopg.connect(fresh_database_url) as conn:
        migrate(conn)
        again = migrate(conn)

    assert again == []
    assert _recorded(fresh_database_url) == [m.version for m in available()]


def test_two_threads_migrating_at_once_apply_each_migration_exactly_once(
    fresh_database_url: str,
) -> None:
    barrier = threading.Barrier(2)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with psycopg.connect(fresh_database_url) as conn:
                barrier.wait(timeout=30)
                results.append(migrate(conn))
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert sorted(results, key=len) == [[], [m.version for m in available()]]
    assert _recorded(fresh_database_url) == [m.version for m in available()]


def test_two_processes_migrating_at_once_both_succeed_and_one_does_the_work(
    fresh_database_url: str,
) -> None:
    command = [sys.executable, "-c", MIGRATE_IN_A_PROCESS, fresh_database_url]

    procs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]

    assert [proc.returncode for proc in procs] == [0, 0], outputs
    applied = sorted(out.strip() for out, _ in outputs)
    assert applied == ["", ",".join(m.version for m in available())]
    assert _recorded(fresh_database_url) == [m.version for m in available()]


def test_a_failing_migration_rolls_back_every_pending_migration(
    fresh_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = available()
    broken = Migration("9999_broken", "create table tickq.half_done (id int); select 1 / 0;")
    monkeypatch.setattr("queue_core.migrate.available", lambda: [*shipped, broken])

    with psycopg.connect(fresh_database_url) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            migrate(conn)
        conn.rollback()
        left = conn.execute("select to_regnamespace('tickq') is not null").fetchone()
        still_pending = pending(conn)

    assert left == (False,)  # not even the schema the first migration creates
    assert still_pending == [m.version for m in [*shipped, broken]]
    monkeypatch.undo()
    with psycopg.connect(fresh_database_url) as conn:
        assert migrate(conn) == [m.version for m in shipped]


def test_migrate_through_a_version_stops_after_it(fresh_database_url: str) -> None:
    shipped = [m.version for m in available()]
    with psycopg.connect(fresh_database_url) as conn:
        assert migrate(conn, through="0013") == [v for v in shipped if v[:4] <= "0013"]
        assert migrate(conn, through="0013") == []
        assert migrate(conn) == [v for v in shipped if v[:4] > "0013"]
