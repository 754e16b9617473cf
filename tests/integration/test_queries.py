"""Statements run as written, and rows that carry a job are read by column name."""

from __future__ import annotations

import re

import psycopg
import pytest

from queue_core import PostgresStore
from queue_core.errors import DatabaseError
from queue_core.model.jobs import JOB_COLUMNS
from queue_core.model.validation import job_spec
from queue_core.postgres import executor as executor_module
from queue_core.postgres import statements as queries
from queue_core.postgres.statements import QUERIES


def test_every_statement_is_plain_sql_with_psycopg_parameters_only() -> None:
    for name, statement in QUERIES.items():
        assert "{" not in re.sub(r"'[^']*'", "", statement), name  # no template placeholders
        assert not statement.rstrip().endswith(";"), name


def test_every_statement_fits_psycopg_s_query_cache() -> None:
    """psycopg caches a statement's placeholder conversion only up to 4096 characters
    (psycopg._queries.MAX_CACHED_STATEMENT_LENGTH); a longer one is re-parsed on every
    execution, a cost a batch of ten jobs feels. Comment lines are left out to stay under."""
    for name, statement in QUERIES.items():
        assert len(statement) <= 4096, (name, len(statement))
        assert not any(line.lstrip().startswith("--") for line in statement.splitlines()), name


def test_a_comment_after_code_stays_with_its_line() -> None:
    statements = queries.parse("-- name: one\nselect '--' as dashes -- said twice\n  -- gone\n")
    assert statements == {"one": "select '--' as dashes -- said twice"}


def test_the_variants_are_named_statements_of_their_own() -> None:
    assert "any(%(queues)s::text[])" in QUERIES["jobs_finish_and_claim_queues"]
    assert "queue = %(queue)s" in QUERIES["jobs_finish_and_claim"]
    assert "count(*)" in QUERIES["retention_count"]
    assert "delete from tickq.jobs" in QUERIES["retention_prune"]


def test_a_statement_whose_job_columns_are_reordered_fails_instead_of_shifting_fields(
    conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job, and jobs_get with two of its columns swapped
    store = PostgresStore(conn)
    job_id = store.enqueue(job_spec("embed", {})).id
    swapped = list(JOB_COLUMNS)
    swapped[1], swapped[2] = swapped[2], swapped[1]
    monkeypatch.setitem(
        QUERIES, "jobs_get", f"select {', '.join(swapped)} from tickq.jobs where id = %(id)s"
    )
    monkeypatch.setattr(executor_module, "_JOB_AT", {})

    # When it is read, then the store refuses the row rather than mixing queue and type up
    with pytest.raises(DatabaseError, match="job columns"):
        store.get(job_id)


def test_job_columns_after_other_columns_are_found_by_name(
    conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = PostgresStore(conn)
    job_id = store.enqueue(job_spec("embed", {"n": 1})).id
    monkeypatch.setitem(
        QUERIES,
        "jobs_get",
        f"select 1 as extra, {', '.join(JOB_COLUMNS)} from tickq.jobs where id = %(id)s",
    )
    monkeypatch.setattr(executor_module, "_JOB_AT", {})

    job = store.get(job_id)

    assert (job.id, job.type, job.payload) == (job_id, "embed", {"n": 1})
