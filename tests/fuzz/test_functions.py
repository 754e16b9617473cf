"""ApiFunction and EnqueueFunction under hostile events: never a 5xx (or an exception) for
a client's mistake, always a message saying what is wrong, and nothing written on refusal."""

from __future__ import annotations

import base64
import json
from collections import Counter
from typing import Any

import hypothesis
import psycopg
from hypothesis import given
from hypothesis import strategies as st

from tests.functions.conftest import FakeContext, http_event
from tests.fuzz import strategies as bad
from tests.fuzz.test_python_api import snapshot
from tests.model.profiles import budget
from tickq.functions import api, enqueue

FIELDS = [
    "type",
    "payload",
    "queue",
    "idempotency_key",
    "priority",
    "max_attempts",
    "delay",
    "run_after",
    "lease_seconds",
    "backoff",
    "user_id",
    "status",
    "attempts",
    "lease_token",
]
hostile_body = st.one_of(
    st.dictionaries(st.sampled_from(FIELDS), bad.any_json_field, max_size=4).map(
        lambda d: {"type": "report", **d}
    ),
    bad.json_payload.map(lambda p: {"type": "report", "payload": p}),
    bad.json_value,
)
# A request the API accepts, with hostile but storable text in its payload and key.
valid_body = st.builds(
    lambda type_, payload, options: {"type": type_, "payload": payload, **options},
    bad.valid_name,
    bad.storable_payload,
    bad.valid_options.map(lambda o: {k: v for k, v in o.items() if k != "user_id"}),
)
request_body = bad.mostly(valid_body, hostile_body)
job_id = bad.mostly(st.uuids().map(str), st.one_of(bad.sql_injection, st.text(max_size=40)))
sub = bad.mostly(st.uuids().map(str), st.one_of(bad.nasty_text, st.none()))


@st.composite
def http_request(draw: st.DrawFn) -> dict[str, Any]:
    route = draw(st.sampled_from(["post", "post", "list", "get", "retry", "cancel"]))
    who = draw(sub)
    if route == "post":
        kind = draw(bad.mostly(st.just("json"), st.sampled_from(["raw", "invalid-utf8"])))
        if kind == "json":
            try:
                raw = json.dumps(draw(request_body))
            except (ValueError, RecursionError):
                raw = "{"
        else:
            raw = draw(bad.nasty_text)
        key = draw(bad.mostly(st.none(), bad.nasty_text))
        headers = {} if key is None or "\x00" in key else {"Idempotency-Key": key}
        event = http_event("POST", "/jobs", raw_body=raw, sub=who, headers=headers)
        if kind == "invalid-utf8":
            event["body"] = base64.b64encode(b'\xff\xfe{"type": "\xc3"}').decode()
            event["isBase64Encoded"] = True
        return event
    if route == "list":
        keys = st.sampled_from(["status", "type", "queue", "limit", "cursor", "' or 1=1"])
        good = st.fixed_dictionaries(
            {},
            optional={
                "status": st.sampled_from(["queued", "running", "dead"]),
                "type": bad.valid_name,
                "limit": st.integers(1, 100).map(str),
            },
        )
        hostile = st.dictionaries(keys, bad.nasty_text.filter(lambda s: len(s) < 5000))
        query = draw(bad.mostly(good, hostile))
        return http_event("GET", "/jobs", query=query, sub=who)
    path = f"/jobs/{draw(job_id)}" + ("" if route == "get" else f"/{route}")
    return http_event("GET" if route == "get" else "POST", path, sub=who)


def check_answer(status: int, body: Any) -> None:
    assert status < 500, body
    if status >= 400:
        assert isinstance(body, dict) and body.get("message"), body


def kind_of_answer(status: int, body: Any) -> str:
    if status == 400 and "HTTP API" in str(body):
        return "not an HTTP event"
    if status == 401:
        return "no identity"
    if status == 202:
        return "written"
    return "routed, answered" if status < 400 else "routed, refused"


def test_api_answers_hostile_requests_without_5xx_and_writes_nothing_on_refusal(
    conn: psycopg.Connection, as_app: None, tasks: Any, lambda_context: FakeContext
) -> None:
    reach: Counter[str] = Counter()

    @budget(ci=120, long=3000)
    @given(event=bad.mostly(http_request(), st.one_of(bad.wrong_type, bad.json_value)))
    def example(event: Any) -> None:
        before = snapshot(conn)
        response = api.handler(event, lambda_context)
        body = json.loads(response["body"]) if response.get("body") else None
        check_answer(response["statusCode"], body)
        kind = kind_of_answer(response["statusCode"], body)
        reach[kind] += 1
        hypothesis.event(kind)
        if kind == "written":
            assert isinstance(body, dict)
            assert_written_as_asked(body, json.loads(event["body"]))
        if (
            response["statusCode"] >= 400
            or event.get("requestContext", {}).get("http", {}).get("method") == "GET"
        ):
            assert snapshot(conn) == before

    example()
    print("api fuzz reach:", dict(reach))
    routed = reach["written"] + reach["routed, answered"] + reach["routed, refused"]
    assert routed >= sum(reach.values()) / 2 and reach["written"] > 0, reach


def assert_written_as_asked(job: dict[str, Any], asked: dict[str, Any]) -> None:
    for field in ("type", "queue", "max_attempts", "idempotency_key"):
        if asked.get(field) is not None:
            assert job[field] == asked[field], field
    # An outside caller's priority ranks only its own jobs: stored as its owner's order,
    # the job's global level stays 0 (a keyed duplicate shows the holder's, also 0).
    assert job["priority"] == 0, "priority"
    assert job["payload"] == (asked.get("payload") or {})


enqueue_event = st.one_of(
    request_body,
    st.lists(request_body, min_size=1, max_size=4).map(lambda jobs: {"jobs": jobs}),
    st.lists(request_body, max_size=3).map(
        lambda jobs: {"jobs": [*jobs, {"type": "fine"}], "extra": 1}
    ),
    bad.wrong_type,
    bad.json_value,
)


@budget(ci=120, long=3000)
@given(event=enqueue_event)
def test_enqueue_function_refuses_hostile_events_clearly_and_writes_nothing(
    conn: psycopg.Connection,
    as_worker: None,
    tasks: Any,
    lambda_context: FakeContext,
    event: Any,
) -> None:
    before = snapshot(conn)
    answer = enqueue.handler(event, lambda_context)
    assert isinstance(answer, dict)
    if "jobs" in answer:
        assert all(job["status"] == "queued" for job in answer["jobs"])
        return
    assert answer.get("error") and answer.get("message"), answer
    assert snapshot(conn) == before
