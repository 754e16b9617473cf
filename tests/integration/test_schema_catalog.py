"""The current-state files and the migrations say the same schema.

One database is built from the current-state files (queue_core/schema), another from the
frozen baseline (tests/schema/baseline_0016b.sql, what the unreleased migrations 0001-0016b
made) plus every later migration; their catalogs must be equal. A change that writes a
migration but not its current-state file, or the other way round, fails here.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from queue_core.errors import SchemaError
from queue_core.migrate import BASELINE, FOLDED, Migration, available, migrate
from tests.schema.baseline import load_baseline
from tests.schema.catalog import catalog, differences

NewDatabase = Callable[[], str]


def from_current_state(new_database: NewDatabase) -> str:
    url = new_database()
    with psycopg.connect(url) as conn:
        migrate(conn)
    return url


def from_baseline(new_database: NewDatabase) -> tuple[str, list[str]]:
    """A database at the frozen baseline, brought up to date; and what migrate recorded."""
    url = new_database()
    load_baseline(url)
    with psycopg.connect(url) as conn:
        recorded = migrate(conn)
    return url, recorded


def recorded_versions(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("select version from tickq.schema_migrations")]


def test_the_current_state_is_the_baseline_plus_every_later_migration(
    new_database: NewDatabase,
) -> None:
    current = from_current_state(new_database)
    migrated, recorded = from_baseline(new_database)

    assert differences(catalog(current), catalog(migrated)) == []
    # A database at 0016b was recognised as at the baseline; only later migrations applied.
    assert recorded == [BASELINE, *(m.version for m in available())]
    assert sorted(recorded_versions(migrated)) == sorted([*FOLDED, *recorded])
    assert sorted(recorded_versions(current)) == sorted(recorded)


def test_a_migration_its_current_state_file_does_not_hold_is_reported(
    new_database: NewDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a later migration that adds an index tables.sql does not have
    extra = Migration("9999_type_idx", "create index jobs_type_idx on tickq.jobs_live (type);")
    shipped = available()
    monkeypatch.setattr("queue_core.migrate.available", lambda: [*shipped, extra])

    # When one database is built from the current state and one through the migrations
    current = from_current_state(new_database)
    migrated, recorded = from_baseline(new_database)

    # Then both say they are at that migration, and the comparison names the index
    assert extra.version in recorded_versions(current)
    assert extra.version in recorded
    assert differences(catalog(current), catalog(migrated)) == [
        "indexes: only in the second: ('tickq.jobs_type_idx', 'CREATE INDEX jobs_type_idx"
        " ON tickq.jobs_live USING btree (type)')"
    ]


def test_a_function_changed_in_its_file_alone_is_reported(
    new_database: NewDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a current-state function file changed without a migration
    from queue_core import migrate as module

    shipped = module.schema_files()

    def edited() -> list[tuple[str, str]]:
        return [
            (name, text.replace("if jsonb_array_length(v_kept) > 20 then", "if false then"))
            for name, text in shipped
        ]

    monkeypatch.setattr(module, "schema_files", edited)

    # When it is compared with the migrations, then the function's definition differs
    found = differences(
        catalog(from_current_state(new_database)), catalog(from_baseline(new_database)[0])
    )
    assert [line.split(",")[0] for line in found] == [
        "functions: only in the first: ('tickq.error_history(jsonb",
        "functions: only in the second: ('tickq.error_history(jsonb",
    ]


def test_a_database_at_an_older_unreleased_version_is_refused_and_left_alone(
    new_database: NewDatabase,
) -> None:
    url = new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("create schema tickq")
        conn.execute("create table tickq.schema_migrations (version text primary key)")
        conn.execute("create table tickq.jobs (id uuid)")
        conn.execute(
            "insert into tickq.schema_migrations select unnest(%s::text[])",
            (list(FOLDED[:13]),),
        )

    with psycopg.connect(url) as conn, pytest.raises(SchemaError) as raised:
        migrate(conn)

    message = str(raised.value)
    assert "at migration 0013_job_keys" in message
    assert "0016b_job_keys_by_key" in message and "Nothing was changed" in message
    assert sorted(recorded_versions(url)) == sorted(FOLDED[:13])
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "select relname from pg_class where relnamespace = 'tickq'::regnamespace"
            " and relkind in ('r', 'p') order by 1"
        ).fetchall()
    assert tables == [("jobs",), ("schema_migrations",)]


def test_a_tickq_schema_without_a_record_of_migrations_is_refused(
    new_database: NewDatabase,
) -> None:
    url = new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("create schema tickq")
        conn.execute("create table tickq.jobs (id uuid)")

    with psycopg.connect(url) as conn, pytest.raises(SchemaError, match="no record of"):
        migrate(conn)
    with psycopg.connect(url) as conn:
        assert conn.execute("select to_regclass('tickq.schema_migrations')").fetchone() == (None,)


def test_a_storage_setting_its_current_state_file_does_not_hold_is_reported(
    new_database: NewDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a later migration that sets an autovacuum option of the live partition's TOAST
    # table, which tables.sql does not set to that value
    extra = Migration(
        "9999_toast_vacuum",
        "alter table tickq.jobs_live set (toast.autovacuum_vacuum_threshold = 50);",
    )
    shipped = available()
    monkeypatch.setattr("queue_core.migrate.available", lambda: [*shipped, extra])

    # When one database is built from the current state and one through the migrations
    found = differences(
        catalog(from_current_state(new_database)), catalog(from_baseline(new_database)[0])
    )

    # Then the comparison names the live partition's options, on both sides
    assert [line.split(",")[0] for line in found] == [
        "tables: only in the first: ('jobs_live'",
        "tables: only in the second: ('jobs_live'",
    ]
    assert "'autovacuum_vacuum_threshold=50'" in found[1]
    assert "'autovacuum_vacuum_threshold=50'" not in found[0]
