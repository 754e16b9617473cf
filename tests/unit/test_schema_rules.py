"""A function's text is in its file alone: migrations never create or edit one."""

from __future__ import annotations

from pathlib import Path

from queue_core.migrate import Migration, available, schema_files
from tests.schema.rules import file_problems, migration_problems
from tests.schema.sqltext import normalized, statements

FILES = schema_files()
CLAIM_FAIR = dict(FILES)["functions/claim_fair.sql"]
SCHEMA = Path(__file__).resolve().parents[2] / "queue_core" / "schema"


def test_the_shipped_migrations_and_function_files_keep_the_rules() -> None:
    assert file_problems(FILES) == []
    assert migration_problems(available()) == []


def test_every_function_file_is_applied() -> None:
    on_disk = sorted(f"functions/{f.name}" for f in (SCHEMA / "functions").glob("*.sql"))
    assert [name for name, _ in FILES if name.startswith("functions/")] == on_disk
    assert len(on_disk) > 30


def test_a_migration_that_patches_a_function_definition_is_refused() -> None:
    patch = Migration(
        "0018_patch",
        """do $$
        begin
            execute replace(pg_get_functiondef('tickq.claim_fair'::regproc), 'a', 'b');
        end $$;""",
    )
    from_source = Migration(
        "0019_source",
        "select prosrc from pg_proc where proname = 'claim_fair';"
        " do $$ begin execute format('create or replace function tickq.f() returns int"
        " language sql as %L', 'select 1'); end $$;",
    )

    assert migration_problems([patch, from_source]) == [
        "0018_patch reads a function's stored text (pg_get_functiondef): write the"
        " function's whole new definition in its file instead",
        "0019_source reads a function's stored text (prosrc): write the function's whole new"
        " definition in its file instead",
        "0019_source builds a CREATE FUNCTION in a string: write the function in its file instead",
    ]


def test_a_migration_that_creates_a_function_is_refused() -> None:
    made = Migration(
        "0040_f", "create function tickq.f() returns integer language sql as $$ select 1 $$;"
    )
    replaced = Migration("0041_claim_fair", CLAIM_FAIR)
    dropped = Migration("0042_drop_f", "drop function if exists tickq.f() cascade;")

    assert migration_problems([made, replaced, dropped]) == [
        "0040_f creates tickq.f: a function's text lives in queue_core/schema/functions/"
        " alone, which the migrator applies again when it changes",
        "0041_claim_fair creates tickq.claim_fair: a function's text lives in"
        " queue_core/schema/functions/ alone, which the migrator applies again when it changes",
    ]


def test_a_function_file_holds_only_its_own_function() -> None:
    two = CLAIM_FAIR + "\ncreate index x on tickq.jobs (id);\n"
    misnamed = [("functions/claim_unfair.sql", CLAIM_FAIR)]

    granted = CLAIM_FAIR + "\nrevoke all on function tickq.claim_fair(text) from public;\n"
    other = CLAIM_FAIR + "\ngrant execute on function tickq.cancel(uuid) to tickq_app;\n"
    assert file_problems([("functions/claim_fair.sql", granted)]) == []
    assert file_problems([("functions/claim_fair.sql", two)]) == [
        "functions/claim_fair.sql must hold the CREATE FUNCTION of tickq.claim_fair, then only"
        " REVOKE and GRANT on it"
    ]
    assert file_problems([("functions/claim_fair.sql", other)]) == [
        "functions/claim_fair.sql must hold the CREATE FUNCTION of tickq.claim_fair, then only"
        " REVOKE and GRANT on it"
    ]
    assert file_problems(misnamed) == [
        "functions/claim_unfair.sql must hold the CREATE FUNCTION of tickq.claim_unfair, then"
        " only REVOKE and GRANT on it"
    ]
    plain = CLAIM_FAIR.replace("create or replace function", "create function")
    assert file_problems([("functions/claim_fair.sql", plain)]) == [
        "functions/claim_fair.sql must say CREATE OR REPLACE FUNCTION: the migrator applies it"
        " again when its text changes"
    ]


def test_definitions_compare_equal_without_comments_spacing_or_quote_tags() -> None:
    written = """create function tickq.f() returns int  -- one
        language sql as $$
        /* a /* nested */ comment */ select  1 + 2  -- two
    $$"""
    stored = (
        "CREATE FUNCTION tickq.f()\n RETURNS int LANGUAGE sql AS $function$ select 1+2 $function$"
    )

    assert normalized(written) == normalized(stored)
    assert normalized("select 'a  -- b'") != normalized("select 'a -- b'")
    assert normalized('select "Mixed"') != normalized('select "mixed"')


def test_statements_split_at_semicolons_outside_quotes() -> None:
    script = "select ';'; do $$ begin perform 1; end $$; -- last; one\nselect 2;"

    assert statements(script) == [
        "select ';';",
        "do $$ begin perform 1; end $$;",
        "-- last; one\nselect 2;",
    ]
