"""One list of the tables that hang on a job: every way a job goes (a delete, through
tickq.jobs_forget; emptying tickq.jobs, through the triggers that TRUNCATE fires; a day
partition dropped by tickq.jobs_partition_drop) takes the job's rows in each of them, and
every table of the schema that holds a job's id is either on the list or says why its rows
outlive the job. A table added to one of these paths and not the others fails here."""

from __future__ import annotations

import re

import pytest

from queue_core.migrate import schema_files
from tests.schema.sqltext import normalized, statements

FILES = dict(schema_files())

# The tables whose rows hang on a job, and the columns that name it there.
HANGING = {
    "job_keys": ("job_id",),
    "job_ids": ("id",),
    "job_steps": ("job_id",),
    "job_signals": ("job_id",),
    "job_step_tries": ("job_id",),
    "job_dependencies": ("child_id", "parent_id"),
    "job_children": ("parent_id", "child_id"),
    "job_gates": ("job_id",),
    "job_settlements": ("parent_id",),
}
# Tables that name a job but whose rows outlive it, and why.
OUTLIVING = {
    # Events are at-least-once deliveries of what happened: a job pruned before its events
    # went out must not take them; the outbox has its own retention.
    "outbox": ("job_id",),
}
JOB_ID_COLUMNS = {"job_id", "parent_id", "child_id"}


def deleted_tables(path: str) -> set[str]:
    """The tickq tables a function file deletes rows from (in static or dynamic SQL)."""
    return set(re.findall(r"delete from tickq\.(\w+)", normalized(FILES[path])))


def top_level(text: str) -> list[str]:
    """The comma-separated items of a parenthesised list, nested parentheses kept whole."""
    items, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items, current = [*items, current], ""
        else:
            current += char
    return [*items, current]


def truncate_functions() -> list[str]:
    """The function files of the triggers that emptying tickq.jobs fires."""
    found = re.findall(
        r"create trigger \w+ after truncate on tickq\.jobs for each statement"
        r" execute function tickq\.(\w+)\(\)",
        normalized(FILES["triggers.sql"]),
    )
    assert found, "no trigger fires on a TRUNCATE of tickq.jobs"
    return [f"functions/{name}.sql" for name in found]


def test_the_list_names_every_table_that_holds_a_jobs_id() -> None:
    # Each table of tables.sql with a column that names a job is on one of the two lists,
    # under those columns (job_ids, whose key is the job's id, is on it by its key).
    named: dict[str, tuple[str, ...]] = {"job_ids": ("id",)}
    for statement in statements(FILES["tables.sql"]):
        created = re.match(r"create table tickq\.(\w+)\((.*)\);?$", normalized(statement))
        if created is None or created.group(1).startswith("jobs"):
            continue
        columns = [c.split()[0] for c in top_level(created.group(2))]
        held = tuple(c for c in columns if c in JOB_ID_COLUMNS)
        if held:
            named[created.group(1)] = held
    expected = {t: tuple(sorted(c)) for t, c in {**HANGING, **OUTLIVING}.items()}
    assert {t: tuple(sorted(c)) for t, c in named.items()} == expected


@pytest.mark.parametrize(
    "way",
    ["functions/jobs_forget.sql", "functions/jobs_partition_drop.sql", "truncate"],
)
def test_every_way_a_job_goes_takes_the_rows_of_every_table_on_the_list(way: str) -> None:
    if way == "truncate":
        gone = set().union(*(deleted_tables(path) for path in truncate_functions()))
    else:
        gone = deleted_tables(way)
    # A job takes its rows of every listed table, and none of a table that outlives it
    # (jobs_forget also deletes a workflow's children, which are jobs).
    assert gone - {"jobs"} == set(HANGING)


def test_a_delete_names_each_column_that_holds_the_job() -> None:
    # jobs_forget and jobs_partition_drop find a table's rows by every column of the list.
    for path, job in (
        ("functions/jobs_forget.sql", "g"),
        ("functions/jobs_partition_drop.sql", "j"),
    ):
        text = normalized(FILES[path])
        for table, columns in HANGING.items():
            found = " ".join(re.findall(rf"delete from tickq\.{table} \w+ using[^;]*", text))
            assert found, f"{path} deletes no row of {table}"
            for column in columns:
                assert re.search(rf"\b\w\.{column} ?= ?{job}\.id\b", found), (path, table, column)
