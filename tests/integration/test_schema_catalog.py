"""The current-state files and the migrations say the same schema.

One database is built from the current-state files (queue_core/schema), another from the
frozen baseline (tests/schema/baseline_0038.sql.gz, what the unreleased migrations through 0038
made) plus every later migration and every function file; their catalogs must be equal. A
change that writes a migration but not its current-state file, or the other way round,
fails here.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from queue_core.errors import SchemaError
from queue_core.migrate import BASELINE, FOLDED, Migration, available, function_files, migrate
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


def recorded_functions(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        query = "select file, digest from tickq.schema_functions order by file"
        return [(r[0], r[1]) for r in conn.execute(query)]


def test_the_current_state_is_the_baseline_plus_every_later_migration(
    new_database: NewDatabase,
) -> None:
    current = from_current_state(new_database)
    migrated, recorded = from_baseline(new_database)

    assert differences(catalog(current), catalog(migrated)) == []
    # A database at 0038 was recognised as at the baseline; the later migrations applied,
    # then every function file, whose text it had never recorded.
    later = [BASELINE, *(m.version for m in available())]
    assert recorded == later + [path for path, _ in function_files()]
    assert sorted(recorded_versions(migrated)) == sorted([*FOLDED, *later])
    assert sorted(recorded_versions(current)) == sorted(later)
    assert recorded_functions(migrated) == recorded_functions(current)


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


def test_a_function_changed_in_its_file_alone_reaches_a_database_made_before(
    new_database: NewDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a database brought up to date, then a function file changed without a migration
    from queue_core import migrate as module

    migrated, _ = from_baseline(new_database)
    shipped = module.schema_files()

    def edited() -> list[tuple[str, str]]:
        return [
            (name, text.replace("if jsonb_array_length(v_kept) > 20 then", "if false then"))
            for name, text in shipped
        ]

    monkeypatch.setattr(module, "schema_files", edited)

    # When it is migrated again, then that file alone is applied, and the database is what
    # one built from the changed files is
    with psycopg.connect(migrated) as conn:
        assert module.pending(conn) == ["functions/error_history.sql"]
        assert migrate(conn) == ["functions/error_history.sql"]
        assert migrate(conn) == []
    assert differences(catalog(from_current_state(new_database)), catalog(migrated)) == []


def test_a_function_changed_in_its_file_alone_differs_from_the_one_shipped(
    new_database: NewDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The comparison sees function bodies: a changed file makes another database.
    from queue_core import migrate as module

    shipped_url = from_current_state(new_database)
    shipped = module.schema_files()
    monkeypatch.setattr(
        module,
        "schema_files",
        lambda: [
            (name, text.replace("if jsonb_array_length(v_kept) > 20 then", "if false then"))
            for name, text in shipped
        ],
    )

    found = differences(catalog(from_current_state(new_database)), catalog(shipped_url))
    assert [line.split(",")[0] for line in found] == [
        "functions: only in the first: ('tickq.error_history(jsonb",
        "functions: only in the second: ('tickq.error_history(jsonb",
    ]


def test_a_new_function_is_made_before_the_migrations_that_grant_on_it(
    new_database: NewDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a database brought up to date, then a new function file whose body reads a
    # column a new migration adds, and a migration that grants on the function
    from queue_core import migrate as module

    migrated, _ = from_baseline(new_database)
    shipped_files = module.schema_files()
    shipped = available()
    body = (
        "create or replace function tickq.zz_colour(p_id uuid) returns text\n"
        "    language sql stable as $$ select colour from tickq.jobs where id = p_id $$;\n"
    )
    monkeypatch.setattr(
        module, "schema_files", lambda: [*shipped_files, ("functions/zz_colour.sql", body)]
    )
    extra = Migration(
        "9999_colour",
        "alter table tickq.jobs add column colour text;"
        " revoke all on function tickq.zz_colour(uuid) from public;"
        " grant execute on function tickq.zz_colour(uuid) to tickq_worker;",
    )
    monkeypatch.setattr(module, "available", lambda: [*shipped, extra])

    # When it is migrated, then both apply, the function checked once the column is there
    with psycopg.connect(migrated) as conn:
        assert migrate(conn) == ["9999_colour", "functions/zz_colour.sql"]
        granted = conn.execute(
            "select has_function_privilege('tickq_worker', 'tickq.zz_colour(uuid)', 'execute'),"
            " has_function_privilege('public', 'tickq.zz_colour(uuid)', 'execute')"
        ).fetchone()
    assert granted == (True, False)


@pytest.mark.parametrize("file_changed", [True, False], ids=["file changed", "file as it was"])
def test_a_function_a_migration_drops_comes_back_from_its_file_with_its_grants(
    new_database: NewDatabase, monkeypatch: pytest.MonkeyPatch, file_changed: bool
) -> None:
    # Given a database brought up to date, then a migration that drops a function (as a
    # change of its result type must), and its file, changed or not, that makes it again
    from queue_core import migrate as module

    migrated, _ = from_baseline(new_database)
    shipped_files = module.schema_files()
    shipped = available()
    monkeypatch.setattr(
        module,
        "schema_files",
        lambda: [
            (name, "-- changed\n" + text if file_changed and name.endswith("/cancel.sql") else text)
            for name, text in shipped_files
        ],
    )
    extra = Migration("9999_drop_cancel", "drop function tickq.cancel(uuid);")
    monkeypatch.setattr(module, "available", lambda: [*shipped, extra])

    # When it is migrated, then the function is back, run by whom its file says, and the
    # database is what one built from the files is
    with psycopg.connect(migrated) as conn:
        assert migrate(conn) == ["9999_drop_cancel", "functions/cancel.sql"]
        granted = conn.execute(
            "select has_function_privilege('tickq_app', 'tickq.cancel(uuid)', 'execute'),"
            " has_function_privilege('public', 'tickq.cancel(uuid)', 'execute')"
        ).fetchone()
    assert granted == (True, False)
    assert differences(catalog(from_current_state(new_database)), catalog(migrated)) == []


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
    assert f"at migration {FOLDED[12]}" in message
    assert "0038_timeouts" in message and "Nothing was changed" in message
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
