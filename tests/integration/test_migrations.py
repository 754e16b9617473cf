"""Migrations: a fresh database built whole, later migrations applied once each and recorded,
all or nothing, and safe when two processes race on a new database."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest

from queue_core.errors import SchemaError
from queue_core.migrate import BASELINE, Migration, available, migrate, pending

MIGRATE_IN_A_PROCESS = """
import sys, psycopg
from queue_core.migrate import migrate
with psycopg.connect(sys.argv[1]) as conn:
    print(",".join(migrate(conn)))
"""
LATER = [
    Migration("9001_type_idx", "create index jobs_type_idx on tickq.jobs_live (type);"),
    Migration("9002_queue_idx", "create index jobs_queue_idx on tickq.jobs_live (queue);"),
]


SHIPPED = available()


def _ship(monkeypatch: pytest.MonkeyPatch, *extra: Migration) -> None:
    """Make migrate() see the migrations this tickq ships and `extra` after them."""
    monkeypatch.setattr("queue_core.migrate.available", lambda: [*SHIPPED, *extra])


def _recorded(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("select version from tickq.schema_migrations order by version")
        return [version for (version,) in rows]


def _everything() -> list[str]:
    return [BASELINE, *(m.version for m in available())]


def _index(url: str, name: str) -> bool:
    with psycopg.connect(url) as conn:
        row = conn.execute("select to_regclass(%s) is not null", (f"tickq.{name}",)).fetchone()
    return bool(row and row[0])


def test_migrate_on_a_fresh_database_builds_it_and_records_every_version(
    fresh_database_url: str,
) -> None:
    with psycopg.connect(fresh_database_url) as conn:
        before = pending(conn)
        told: list[str] = []
        applied = migrate(conn, progress=told.append)
        after = pending(conn)

    assert before == applied == _everything()
    assert told == [BASELINE]  # built whole: later migrations are in the current state
    assert after == []
    assert _recorded(fresh_database_url) == sorted(_everything())


def test_migrate_a_second_time_changes_nothing(fresh_database_url: str) -> None:
    with psycopg.connect(fresh_database_url) as conn:
        migrate(conn)
        again = migrate(conn)

    assert again == []
    assert _recorded(fresh_database_url) == sorted(_everything())


def test_two_threads_migrating_at_once_build_the_database_exactly_once(
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
    assert sorted(results, key=len) == [[], _everything()]
    assert _recorded(fresh_database_url) == sorted(_everything())


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
    assert applied == ["", ",".join(_everything())]
    assert _recorded(fresh_database_url) == sorted(_everything())


def test_later_migrations_apply_in_order_once_each(
    fresh_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(fresh_database_url) as conn:
        migrate(conn)
        _ship(monkeypatch, *LATER)
        told: list[str] = []

        assert pending(conn) == [m.version for m in LATER]
        assert migrate(conn, progress=told.append) == [m.version for m in LATER]
        assert migrate(conn) == []

    assert told == [m.version for m in LATER]
    assert _index(fresh_database_url, "jobs_type_idx")
    assert _index(fresh_database_url, "jobs_queue_idx")


def test_a_failing_migration_rolls_back_every_pending_migration(
    fresh_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(fresh_database_url) as conn:
        migrate(conn)
    broken = Migration("9999_broken", "create table tickq.half_done (id int); select 1 / 0;")
    _ship(monkeypatch, *LATER, broken)

    with psycopg.connect(fresh_database_url) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero) as raised:
            migrate(conn)
        conn.rollback()
        still_pending = pending(conn)

    assert "in queue_core/migrations/9999_broken.sql" in raised.value.__notes__
    assert still_pending == [m.version for m in [*LATER, broken]]
    assert not _index(fresh_database_url, "jobs_type_idx")
    assert not _index(fresh_database_url, "half_done")
    _ship(monkeypatch, *LATER)
    with psycopg.connect(fresh_database_url) as conn:
        assert migrate(conn) == [m.version for m in LATER]


def test_a_failing_build_leaves_nothing_behind(
    fresh_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from queue_core import migrate as module

    files = module.schema_files()
    monkeypatch.setattr(module, "schema_files", lambda: [*files, ("broken.sql", "select 1/0")])

    with psycopg.connect(fresh_database_url) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero) as raised:
            migrate(conn)
        conn.rollback()
        left = conn.execute("select to_regnamespace('tickq') is not null").fetchone()

    assert "in queue_core/schema/broken.sql" in raised.value.__notes__
    assert left == (False,)  # not even the schema the first file creates


def test_migrate_through_a_version_stops_after_it(
    fresh_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(fresh_database_url) as conn:
        migrate(conn)
        _ship(monkeypatch, *LATER)

        assert migrate(conn, through="9001") == ["9001_type_idx"]
        assert migrate(conn, through="9001") == []
        assert migrate(conn) == ["9002_queue_idx"]


def test_through_on_a_fresh_database_is_refused_when_it_leaves_a_migration_out(
    fresh_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ship(monkeypatch, *LATER)

    with psycopg.connect(fresh_database_url) as conn:
        with pytest.raises(SchemaError, match="built whole"):
            migrate(conn, through="9001")
        conn.rollback()
        left = conn.execute("select to_regnamespace('tickq') is not null").fetchone()

    assert left == (False,)


def test_a_migration_that_sorts_before_the_baseline_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from queue_core import migrate as module

    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "0016c_late.sql").write_text("select 1;")
    monkeypatch.setattr(module.resources, "files", lambda package: tmp_path)

    with pytest.raises(SchemaError, match="sorts before the baseline"):
        module.available()
