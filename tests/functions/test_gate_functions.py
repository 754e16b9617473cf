"""Debounce and throttle through ApiFunction (as a tickq_app login: keys per caller) and
EnqueueFunction (as a worker): flags in the answers, the gate in the job view, refusals
answered 422 that write nothing."""

from __future__ import annotations

from uuid import uuid4

import psycopg
import pytest

from tickq.functions import enqueue

from .conftest import FakeContext, Invoke

ALICE = uuid4()
BOB = uuid4()
DEBOUNCE = {"key": "doc-1", "seconds": 30, "max_seconds": 300}


def count_jobs(conn: psycopg.Connection) -> int:
    row = conn.execute("select count(*) from tickq.jobs").fetchone()
    assert row is not None
    return int(row[0])


def test_the_api_debounces_a_callers_burst_and_shows_it_in_the_job_view(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    body = {"type": "reindex", "debounce": DEBOUNCE}
    first_status, first = call_api("POST", "/jobs", body={**body, "payload": {"v": 1}}, sub=ALICE)
    again_status, again = call_api("POST", "/jobs", body={**body, "payload": {"v": 2}}, sub=ALICE)
    other_status, other = call_api("POST", "/jobs", body=body, sub=BOB)  # keys per caller

    assert (first_status, again_status, other_status) == (202, 200, 202)
    assert (first["debounced"], again["debounced"]) == (False, True)
    assert again["id"] == first["id"] != other["id"]
    status, view = call_api("GET", f"/jobs/{first['id']}", sub=ALICE)
    assert status == 200 and view["payload"] == {"v": 2}
    assert view["gate"]["summary"] == "debounced 1 time (key doc-1)"
    assert view["gate"]["enqueues"] == 2
    assert count_jobs(conn) == 2


def test_the_api_shows_a_throttled_enqueue_as_a_duplicate(call_api: Invoke) -> None:
    body = {"type": "sync", "throttle": {"key": "tenant-7", "seconds": 60}}
    _, first = call_api("POST", "/jobs", body=body, sub=ALICE)
    status, again = call_api("POST", "/jobs", body=body, sub=ALICE)
    assert status == 200 and again["duplicate"] is True and again["id"] == first["id"]
    _, view = call_api("GET", f"/jobs/{first['id']}", sub=ALICE)
    assert view["gate"]["summary"] == "throttled 1 time (key tenant-7)"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"debounce": DEBOUNCE, "idempotency_key": "k"}, "debounce"),
        ({"debounce": DEBOUNCE, "delay": 5}, "debounce"),
        ({"debounce": DEBOUNCE, "throttle": {"key": "k", "seconds": 1}}, "throttle"),
        ({"debounce": {"key": "k"}}, "debounce"),
        ({"throttle": {"key": "k", "seconds": -1}}, "throttle.seconds"),
    ],
)
def test_the_api_refuses_a_gate_that_means_nothing_with_422(
    call_api: Invoke, conn: psycopg.Connection, body: dict[str, object], field: str
) -> None:
    status, problem = call_api("POST", "/jobs", body={"type": "t", **body}, sub=ALICE)
    assert status == 422 and problem["field"] == field
    assert count_jobs(conn) == 0


@pytest.mark.usefixtures("as_worker")
def test_enqueue_function_flags_debounced_and_throttled_requests(
    conn: psycopg.Connection, lambda_context: FakeContext
) -> None:
    gated = [
        {"type": "reindex", "payload": {"v": 1}, "debounce": DEBOUNCE, "user_id": str(ALICE)},
        {"type": "reindex", "payload": {"v": 2}, "debounce": DEBOUNCE, "user_id": str(ALICE)},
        {"type": "sync", "throttle": {"key": "t", "seconds": 60}},
        {"type": "sync", "throttle": {"key": "t", "seconds": 60}},
    ]
    jobs = enqueue.handler({"jobs": gated}, lambda_context)["jobs"]

    assert [(j["duplicate"], j["debounced"]) for j in jobs] == [
        (False, False),
        (False, True),
        (False, False),
        (True, False),
    ]
    assert jobs[0]["id"] == jobs[1]["id"] and jobs[2]["id"] == jobs[3]["id"]
    assert count_jobs(conn) == 2
    refused = enqueue.handler({**gated[0], "after": [jobs[2]["id"]]}, lambda_context)
    assert refused["field"] == "debounce" and count_jobs(conn) == 2
