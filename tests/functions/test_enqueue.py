"""EnqueueFunction against real PostgreSQL (as a tickq_worker login)."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import psycopg
import pytest

from queue_core import Registry
from tickq.functions import enqueue

from .conftest import FakeContext, lambda_function, record_invokes, sample_event

pytestmark = pytest.mark.usefixtures("as_worker")


def rows(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute(
        "select type, payload, priority, idempotency_key from tickq.jobs order by created_at"
    ).fetchall()


def test_single_sample_event_enqueues_one_job(
    conn: psycopg.Connection, lambda_context: FakeContext
) -> None:
    answer = enqueue.handler(sample_event("enqueue"), lambda_context)

    [job] = answer["jobs"]
    assert job["status"] == "queued" and job["duplicate"] is False
    assert rows(conn) == [("echo", {"document_id": 42}, 5, "document-42")]


def test_repeating_an_idempotency_key_is_flagged_as_duplicate(
    conn: psycopg.Connection, lambda_context: FakeContext
) -> None:
    first = enqueue.handler(sample_event("enqueue"), lambda_context)["jobs"][0]
    again = enqueue.handler(sample_event("enqueue"), lambda_context)["jobs"][0]
    assert again == {**first, "duplicate": True}
    assert len(rows(conn)) == 1


def test_batch_sample_event_enqueues_every_job(
    conn: psycopg.Connection, lambda_context: FakeContext
) -> None:
    answer = enqueue.handler(sample_event("enqueue-batch"), lambda_context)
    assert [j["duplicate"] for j in answer["jobs"]] == [False, False]
    assert [r[1] for r in rows(conn)] == [{"document_id": 1}, {"document_id": 2}]


def test_a_trusted_caller_may_name_the_owner(
    conn: psycopg.Connection, lambda_context: FakeContext
) -> None:
    owner = uuid4()
    enqueue.handler({"type": "t", "user_id": str(owner)}, lambda_context)
    assert conn.execute("select user_id from tickq.jobs").fetchone() == (owner,)


@pytest.mark.parametrize(
    ("event", "phrase", "index"),
    [
        ("text", "must be a JSON object", None),
        ({"payload": {}}, "invalid event: type: Field required", None),
        ({"type": "t", "payload": 5}, "invalid event: payload: Input should be", None),
        ({"jobs": []}, "non-empty list", None),
        ({"jobs": [{"type": "a"}], "type": "b"}, "nothing else", None),
        ({"jobs": [{"type": "ok"}, {"type": "ok", "colour": 1}]}, "jobs[1]: colour", 1),
        ({"jobs": [{"type": "ok"}, {"type": "no spaces"}]}, "invalid type", 1),
        ({"type": "x", "payload": {"blob": "a" * 300_000}}, "over the limit", None),
        ({"jobs": [{"type": "ok"}] * 1001}, "over the limit of 1000", None),
    ],
)
def test_bad_requests_are_answered_clearly_and_nothing_is_written(
    conn: psycopg.Connection,
    lambda_context: FakeContext,
    event: Any,
    phrase: str,
    index: int | None,
) -> None:
    answer = enqueue.handler(event, lambda_context)

    assert phrase in answer["message"]
    assert answer.get("index") == index
    assert rows(conn) == []


def test_unknown_type_is_refused_when_handlers_are_registered(
    conn: psycopg.Connection, lambda_context: FakeContext, tasks: Registry
) -> None:
    tasks.task("known")(lambda job: None)

    answer = enqueue.handler({"type": "unknown"}, lambda_context)

    assert answer["error"] == "UnknownJobType" and answer["known"] == ["known"]
    assert rows(conn) == []


@pytest.mark.usefixtures("aws")
def test_kicks_the_tick_function_after_a_new_job(
    conn: psycopg.Connection, lambda_context: FakeContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKQ_KICK_FUNCTION", "tickq-tick")
    lambda_function("tickq-tick")
    kicks = record_invokes()

    enqueue.handler({"type": "t", "idempotency_key": "k"}, lambda_context)
    enqueue.handler({"type": "t", "idempotency_key": "k"}, lambda_context)  # duplicate

    assert kicks == [{"function": "tickq-tick", "source": "tickq.kick"}]


def test_a_whole_graph_is_enqueued_by_one_event(
    conn: psycopg.Connection, lambda_context: FakeContext
) -> None:
    event = {
        "jobs": [
            {"type": "extract"},
            {"type": "embed", "after": [0]},
            {"type": "embed", "after": [0]},
            {"type": "reindex", "after": [1, 2]},
        ]
    }

    answer = enqueue.handler(event, lambda_context)

    assert [j["status"] for j in answer["jobs"]] == ["queued", "waiting", "waiting", "waiting"]
    edges = conn.execute("select count(*) from tickq.job_dependencies").fetchone()
    assert edges == (4,)


@pytest.mark.parametrize(
    ("after", "phrase"),
    [
        ([1], "not an earlier request"),
        (["0190c0de-0000-7000-8000-0000000000ff"], "not found"),
        (["nope"], "after"),
    ],
)
def test_bad_after_is_refused_with_nothing_written(
    conn: psycopg.Connection, lambda_context: FakeContext, after: list[Any], phrase: str
) -> None:
    answer = enqueue.handler(
        {"jobs": [{"type": "a"}, {"type": "b", "after": after}]}, lambda_context
    )

    assert phrase in answer["message"]
    assert rows(conn) == []


def test_a_parent_of_another_owner_is_not_found(
    conn: psycopg.Connection, lambda_context: FakeContext
) -> None:
    theirs = enqueue.handler({"type": "t", "user_id": str(uuid4())}, lambda_context)["jobs"][0]

    answer = enqueue.handler(
        {"type": "t", "user_id": str(uuid4()), "after": [theirs["id"]]}, lambda_context
    )

    assert answer["error"] == "InvalidParent" and "not found" in answer["message"]
    assert len(rows(conn)) == 1
