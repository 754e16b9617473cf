"""`after` under hostile input: a clear InvalidJob and nothing written, never a crash."""

from __future__ import annotations

from typing import Any

import psycopg
from hypothesis import given
from hypothesis import strategies as st

from queue_core import Registry, enqueue, enqueue_many
from queue_core.errors import InvalidJob
from tests.fuzz import strategies as bad
from tests.model.profiles import budget

REF = st.one_of(bad.any_field, st.integers(-3, 5), st.uuids(), st.uuids().map(str))
AFTER = st.one_of(bad.any_field, st.lists(REF, max_size=4), st.sets(st.uuids(), max_size=3))


def snapshot(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute("select id, status from tickq.jobs order by id").fetchall()


@budget(ci=100, long=2000)
@given(after=AFTER)
def test_a_hostile_after_is_refused_clearly_with_nothing_written(
    conn: psycopg.Connection, after: Any
) -> None:
    before = snapshot(conn)
    try:
        result = enqueue(conn, "report", after=after, using=Registry())
    except InvalidJob as exc:
        assert exc.field == "after" and exc.reason
        assert snapshot(conn) == before
        return
    assert result.status == "queued"  # only an empty `after` gets through: no parent exists


@budget(ci=100, long=2000)
@given(afters=st.lists(AFTER, min_size=1, max_size=3))
def test_a_hostile_graph_is_refused_clearly_with_nothing_written(
    conn: psycopg.Connection, afters: list[Any]
) -> None:
    before = snapshot(conn)
    requests = [{"type": "report", "after": after} for after in afters]
    try:
        results = enqueue_many(conn, requests, using=Registry())
    except InvalidJob as exc:
        assert exc.field.endswith("after") and exc.reason  # jobs[i].after, or a parent
        assert snapshot(conn) == before
        return
    assert len(results) == len(afters)  # only positions of earlier requests got through
