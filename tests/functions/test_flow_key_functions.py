"""Flow keys through the Lambda surfaces: the HTTP API stores a caller's keys under the
caller (an outside caller), EnqueueFunction (another function of the account, trusted)
stores them as given; both refuse bad keys clearly and write nothing."""

from __future__ import annotations

import json
from uuid import uuid4

import psycopg
import pytest

from queue_core.policies.flow_limits import FlowLimits
from tickq.functions import enqueue

from .conftest import FakeContext, Invoke

ALICE = uuid4()


def stored_keys(conn: psycopg.Connection) -> list[list[str]]:
    return [list(r[0]) for r in conn.execute("select flow_keys from tickq.jobs").fetchall()]


def test_the_api_stores_a_callers_keys_under_the_caller(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    status, job = call_api(
        "POST", "/jobs", body={"type": "embed", "flow_keys": ["shop:acme"]}, sub=ALICE
    )
    assert status == 202

    status, fetched = call_api("GET", f"/jobs/{job['id']}", sub=ALICE)

    assert status == 200
    owner = fetched["user_id"]
    assert fetched["flow_keys"] == [f"{owner}/shop:acme"]
    assert stored_keys(conn) == [[f"{owner}/shop:acme"]]


def test_the_api_says_which_key_holds_a_job_back(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    _, job = call_api("POST", "/jobs", body={"type": "embed", "flow_keys": ["shop:a"]}, sub=ALICE)
    _, free = call_api("GET", f"/jobs/{job['id']}", sub=ALICE)
    (stored,) = free["flow_keys"]
    FlowLimits(conn).hold(stored, 300)

    status, held = call_api("GET", f"/jobs/{job['id']}", sub=ALICE)

    assert free["held_by_flow_key"] is None
    assert status == 200 and held["held_by_flow_key"] == stored


@pytest.mark.parametrize("keys", [["no spaces"], [f"k{i}" for i in range(9)], "k"])
def test_the_api_refuses_bad_keys_and_writes_nothing(
    call_api: Invoke, conn: psycopg.Connection, keys: object
) -> None:
    status, answer = call_api("POST", "/jobs", body={"type": "embed", "flow_keys": keys}, sub=ALICE)

    assert status in (400, 422)
    assert "flow_keys" in json.dumps(answer)
    assert stored_keys(conn) == []


@pytest.mark.usefixtures("as_worker")
def test_enqueue_function_stores_a_trusted_callers_keys_as_given(
    conn: psycopg.Connection, lambda_context: FakeContext
) -> None:
    answer = enqueue.handler(
        {"jobs": [{"type": "t", "flow_keys": ["shop:a"]}, {"type": "t"}]}, lambda_context
    )

    assert len(answer["jobs"]) == 2
    assert sorted(stored_keys(conn)) == [[], ["shop:a"]]


@pytest.mark.usefixtures("as_worker")
def test_enqueue_function_refuses_bad_keys_and_writes_nothing(
    conn: psycopg.Connection, lambda_context: FakeContext
) -> None:
    answer = enqueue.handler(
        {"jobs": [{"type": "t"}, {"type": "t", "flow_keys": ["a b"]}]}, lambda_context
    )

    assert "flow key" in answer["message"] and answer["index"] == 1
    assert stored_keys(conn) == []
