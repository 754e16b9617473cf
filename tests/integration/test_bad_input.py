"""Bad input against a real database: a clear error, and not a single row written or changed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from uuid import UUID

import psycopg
import pytest

import queue_core
from queue_core import (
    InvalidJob,
    InvalidTransition,
    JobNotFound,
    PostgresStore,
    Registry,
    Status,
    UnknownJobType,
)
from queue_core.model.validation import job_spec

UNKNOWN = UUID("0190c0de-0000-7000-8000-0000000000ff")


def snapshot(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute("select * from tickq.jobs order by id").fetchall()


@pytest.fixture
def unchanged(conn: psycopg.Connection) -> Iterator[None]:
    """Seed one job of each kind, and check after the test that no row changed."""
    store = PostgresStore(conn)
    store.enqueue(job_spec("embed", {"seed": 1}, idempotency_key="seed"))
    store.enqueue(job_spec("embed", {"seed": 2}, max_attempts=1))
    store.enqueue(job_spec("embed", {"seed": 3}, delay=3600))
    for job in store.claim(limit=10):
        store.complete(job, {"ok": 1})
    before = snapshot(conn)
    yield
    assert snapshot(conn) == before


@pytest.fixture
def registry() -> Registry:
    reg = Registry()
    reg.task("embed")(lambda job: None)
    return reg


@pytest.mark.parametrize(
    ("request_", "error", "field"),
    [
        ({"type": "embd"}, UnknownJobType, "type"),
        ({"type": "embed", "payload": [1, 2]}, InvalidJob, "payload"),
        ({"type": "embed", "payload": {"blob": "x" * (257 * 1024)}}, InvalidJob, "payload"),
        ({"type": "embed", "payload": {"s": "nul\x00"}}, InvalidJob, "payload"),
        ({"type": "embed", "max_attempts": -1}, InvalidJob, "max_attempts"),
        ({"type": "embed", "queue": "bad queue"}, InvalidJob, "queue"),
        ({"type": "embed", "user_id": "' or 1=1 --"}, InvalidJob, "user_id"),
    ],
)
def test_a_bad_enqueue_request_is_refused_before_any_write(
    conn: psycopg.Connection,
    registry: Registry,
    unchanged: None,
    request_: dict[str, Any],
    error: type[Exception],
    field: str,
) -> None:
    with pytest.raises(error) as raised:
        queue_core.enqueue(conn, using=registry, **request_)

    assert isinstance(raised.value, InvalidJob) and raised.value.field == field


def test_one_bad_request_in_a_batch_writes_none_of_the_batch(
    conn: psycopg.Connection, registry: Registry, unchanged: None
) -> None:
    requests = [{"type": "embed", "payload": {"n": n}} for n in range(5)]
    requests.insert(3, {"type": "embed", "payload": "not an object"})

    with pytest.raises(InvalidJob):
        queue_core.enqueue_many(conn, requests, using=registry)


def test_a_spec_that_skipped_validation_is_stopped_by_the_table_constraints(
    conn: psycopg.Connection, unchanged: None
) -> None:
    good = job_spec("embed")
    bad = replace(job_spec("embed"), payload_json="[1, 2]")

    with pytest.raises(InvalidJob, match="jobs_payload_object"):
        PostgresStore(conn).enqueue_many([good, bad])


def test_a_spec_with_zero_attempts_is_stopped_by_the_table_constraints(
    conn: psycopg.Connection, unchanged: None
) -> None:
    with pytest.raises(InvalidJob):
        PostgresStore(conn).enqueue(replace(job_spec("embed"), max_attempts=0))


@pytest.mark.parametrize(
    "job_id", [UNKNOWN, str(UNKNOWN), "not-a-uuid", "'; drop table x; --"], ids=repr
)
@pytest.mark.parametrize("operation", ["get", "cancel", "retry"])
def test_an_unknown_job_id_is_not_found(
    conn: psycopg.Connection, unchanged: None, operation: str, job_id: Any
) -> None:
    store = PostgresStore(conn)

    with pytest.raises(JobNotFound) as raised:
        getattr(store, operation)(job_id)

    assert str(job_id) in str(raised.value)


def test_cancelling_a_finished_job_is_refused_and_changes_nothing(
    conn: psycopg.Connection, unchanged: None
) -> None:
    store = PostgresStore(conn)
    done = store.list_jobs(statuses=["succeeded"]).jobs[0]

    with pytest.raises(InvalidTransition) as raised:
        store.cancel(done.id)

    assert raised.value.status == Status.SUCCEEDED


def test_retrying_a_live_job_is_refused_and_changes_nothing(
    conn: psycopg.Connection, unchanged: None
) -> None:
    store = PostgresStore(conn)
    (waiting,) = store.list_jobs(statuses=["queued"], limit=1).jobs

    with pytest.raises(InvalidTransition):
        store.retry(waiting.id)


def test_retrying_a_dead_job_whose_key_a_live_job_took_is_refused(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    dead = store.enqueue(job_spec("embed", idempotency_key="k", max_attempts=1)).id
    (job,) = store.claim()
    store.fail(job, "boom")
    store.enqueue(job_spec("embed", idempotency_key="k"))
    before = snapshot(conn)

    with pytest.raises(InvalidTransition, match="idempotency key"):
        store.retry(dead)

    assert snapshot(conn) == before


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"statuses": ["done"]}, "status"),
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"limit": True}, "limit"),
        ({"cursor": "garbage"}, "cursor"),
    ],
)
def test_bad_list_options_are_refused(
    conn: psycopg.Connection, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidJob) as raised:
        PostgresStore(conn).list_jobs(**options)

    assert raised.value.field == field
