"""The Python API under hostile input: a clear tickq error or a faithful write, never an
unhandled exception, and a refusal writes nothing."""

from __future__ import annotations

from typing import Any

import psycopg
from hypothesis import given
from hypothesis import strategies as st

from queue_core import Registry, TickqError, enqueue
from queue_core.errors import InvalidJob, JobNotFound
from queue_core.store import PostgresStore
from tests.fuzz import strategies as bad
from tests.model.profiles import budget

OPTIONS = ("queue", "idempotency_key", "priority", "max_attempts", "delay", "user_id")


def snapshot(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute(
        "select id, status, attempts, run_after, updated_at from tickq.jobs order by id"
    ).fetchall()


@budget(ci=150, long=3000)
@given(
    type_=st.one_of(bad.any_field, st.just("report")),
    payload=st.one_of(bad.payload, st.just({"ok": 1})),
    options=st.dictionaries(st.sampled_from(OPTIONS), bad.any_field, max_size=3),
)
def test_enqueue_refuses_bad_input_clearly_and_writes_nothing(
    conn: psycopg.Connection, type_: Any, payload: Any, options: dict[str, Any]
) -> None:
    before = snapshot(conn)
    try:
        result = enqueue(conn, type_, payload, using=Registry(), **options)
    except InvalidJob as exc:
        assert str(exc).startswith("invalid ") and exc.field and exc.reason
        assert snapshot(conn) == before
        return
    job = PostgresStore(conn).get(result.id)
    assert job.type == type_ and job.payload == ({} if payload is None else payload)
    assert job.queue == (options.get("queue") or "default")
    assert job.idempotency_key == options.get("idempotency_key")


@budget(ci=150, long=3000)
@given(
    statuses=st.one_of(st.none(), st.lists(bad.nasty_text, max_size=3)),
    types=st.one_of(st.none(), st.lists(bad.nasty_text, max_size=3)),
    queues=st.one_of(st.none(), st.lists(bad.nasty_text, max_size=3)),
    limit=st.one_of(bad.odd_number, bad.wrong_type),
    cursor=st.one_of(st.none(), bad.nasty_text),
)
def test_listing_with_hostile_filters_returns_a_page_or_a_clear_error(
    conn: psycopg.Connection,
    statuses: list[str] | None,
    types: list[str] | None,
    queues: list[str] | None,
    limit: Any,
    cursor: str | None,
) -> None:
    store = PostgresStore(conn)
    store.enqueue_many([])
    before = snapshot(conn)
    try:
        page = store.list_jobs(
            statuses=statuses, types=types, queues=queues, limit=limit, cursor=cursor
        )
    except InvalidJob as exc:
        assert exc.field and exc.reason
    else:
        assert page.jobs == [] and page.next_cursor is None
    assert snapshot(conn) == before


@budget(ci=100, long=2000)
@given(
    job_id=st.one_of(bad.nasty_text, bad.wrong_type),
    operation=st.sampled_from(["get", "cancel", "retry"]),
)
def test_operations_on_hostile_ids_say_not_found_and_change_nothing(
    conn: psycopg.Connection, job_id: Any, operation: str
) -> None:
    store = PostgresStore(conn)
    enqueue(conn, "victim", {"x": 1}, using=Registry())
    before = snapshot(conn)
    try:
        getattr(store, operation)(job_id)
    except JobNotFound as exc:
        assert "not found" in str(exc)
    except TickqError as exc:  # pragma: no cover - reported with its message
        raise AssertionError(f"unexpected refusal for {job_id!r}: {exc}") from exc
    else:
        raise AssertionError(f"{operation}({job_id!r}) found a job")
    assert snapshot(conn) == before
