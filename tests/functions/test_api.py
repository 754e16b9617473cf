"""ApiFunction against real PostgreSQL, logged in as a member of tickq_app (RLS applies)."""

from __future__ import annotations

import asyncio
import json
import warnings
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import psycopg
import pytest

from queue_core import JobContext, PostgresStore, Registry, Runner
from queue_core.model.json_text import MAX_PAYLOAD_BYTES
from queue_core.model.steps import FOREVER, WaitKind
from queue_core.policies.limits import Limits, queue_limit
from queue_core.postgres import StepStore
from tickq.functions import api
from tickq.functions.http.identity import OWNER_NAMESPACE, caller_id

from .big_jobs import EMOJI, RESULT_CHARS, TEXT_CHARS, WIDE, big_jobs
from .conftest import FakeContext, Invoke, http_event, lambda_function, record_invokes, sample_event

ALICE = uuid4()
BOB = uuid4()


def count_jobs(conn: psycopg.Connection) -> int:
    row = conn.execute("select count(*) from tickq.jobs").fetchone()
    assert row is not None
    return int(row[0])


def test_post_then_get_round_trip(call_api: Invoke) -> None:
    status, job = call_api(
        "POST", "/jobs", body={"type": "embed", "payload": {"doc": 1}}, sub=ALICE
    )
    assert status == 202
    assert job["status"] == "queued" and job["user_id"] == str(ALICE)

    status, fetched = call_api("GET", f"/jobs/{job['id']}", sub=ALICE)

    assert status == 200
    assert fetched["id"] == job["id"] and fetched["payload"] == {"doc": 1}


def test_a_posted_timeout_is_stored_and_shown_with_its_lease(call_api: Invoke) -> None:
    status, job = call_api("POST", "/jobs", body={"type": "embed", "timeout": 5}, sub=ALICE)
    assert status == 202

    status, fetched = call_api("GET", f"/jobs/{job['id']}", sub=ALICE)

    assert status == 200
    assert (fetched["timeout_seconds"], fetched["lease_seconds"]) == (5, 15)
    status, _ = call_api("POST", "/jobs", body={"type": "embed", "timeout": 0}, sub=ALICE)
    assert status == 422  # a value out of bounds, as any other field's


def test_the_job_view_says_how_a_timed_out_attempt_was_stopped(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    registry = Registry()

    @registry.task("hang", backoff={"base": 600, "max": 600})
    async def hang(job: JobContext) -> None:
        await asyncio.sleep(30)

    _, job = call_api("POST", "/jobs", body={"type": "hang", "timeout": 1}, sub=ALICE)
    with Runner(PostgresStore(conn), registry, rand=lambda: 0.0) as runner:
        runner.tick()

    status, fetched = call_api("GET", f"/jobs/{job['id']}", sub=ALICE)

    assert status == 200
    assert (fetched["status"], fetched["timeout_seconds"]) == ("retrying", 1)
    assert fetched["timed_out"] == {"after_seconds": 1, "stopped": "cancelled"}


def test_a_suspended_job_is_listed_and_shown_suspended(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    _, job = call_api("POST", "/jobs", body={"type": "review"}, sub=ALICE)
    store = PostgresStore(conn)
    (claimed,) = store.claim(limit=1)
    assert claimed.lease_token is not None
    StepStore(store).suspend(
        claimed.id, claimed.lease_token, kind=WaitKind.SIGNAL, name="approve", until=FOREVER
    )

    _, listing = call_api("GET", "/jobs", sub=ALICE)
    _, fetched = call_api("GET", f"/jobs/{job['id']}", sub=ALICE)

    assert [(j["id"], j["status"], j["state"]) for j in listing["jobs"]] == [
        (job["id"], "queued", "suspended")
    ]
    assert (fetched["state"], fetched["waiting_for"]["name"]) == ("suspended", "approve")


def test_sample_post_event_enqueues_for_the_token_subject(
    as_app: None, lambda_context: FakeContext, conn: psycopg.Connection
) -> None:
    event = sample_event("api-post-job")
    response = api.handler(event, lambda_context)
    assert response["statusCode"] == 202
    sub = event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"]
    row = conn.execute("select user_id::text, type from tickq.jobs").fetchone()
    assert row == (sub, "echo")


def test_idempotency_key_header_returns_the_existing_job_with_200(call_api: Invoke) -> None:
    headers = {"idempotency-key": "report-7"}
    first_status, first = call_api("POST", "/jobs", body={"type": "r"}, sub=ALICE, headers=headers)
    again_status, again = call_api("POST", "/jobs", body={"type": "r"}, sub=ALICE, headers=headers)
    assert (first_status, again_status) == (202, 200)
    assert again["id"] == first["id"] and again["idempotency_key"] == "report-7"


def test_conflicting_header_and_body_keys_are_refused(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    status, body = call_api(
        "POST",
        "/jobs",
        body={"type": "r", "idempotency_key": "a"},
        headers={"Idempotency-Key": "b"},
        sub=ALICE,
    )
    assert status == 400 and "differ" in body["message"]
    assert count_jobs(conn) == 0


def test_users_never_see_each_others_jobs(call_api: Invoke) -> None:
    _, alices = call_api("POST", "/jobs", body={"type": "embed"}, sub=ALICE)
    call_api("POST", "/jobs", body={"type": "embed"}, sub=BOB)

    status, listing = call_api("GET", "/jobs", sub=BOB)
    assert status == 200
    assert [j["user_id"] for j in listing["jobs"]] == [str(BOB)]
    for method, path in (
        ("GET", f"/jobs/{alices['id']}"),
        ("POST", f"/jobs/{alices['id']}/cancel"),
        ("POST", f"/jobs/{alices['id']}/retry"),
    ):
        status, body = call_api(method, path, sub=BOB)
        assert status == 404, (method, path, body)
        assert body["error"] == "JobNotFound"


def test_same_idempotency_key_from_two_users_makes_two_jobs(call_api: Invoke) -> None:
    headers = {"idempotency-key": "shared"}
    _, a = call_api("POST", "/jobs", body={"type": "t"}, sub=ALICE, headers=headers)
    status, b = call_api("POST", "/jobs", body={"type": "t"}, sub=BOB, headers=headers)
    assert status == 202 and a["id"] != b["id"]


def test_no_identity_is_401_and_writes_nothing(call_api: Invoke, conn: psycopg.Connection) -> None:
    status, body = call_api("POST", "/jobs", body={"type": "embed"}, sub=None)
    assert status == 401 and "identity" in body["message"]
    assert count_jobs(conn) == 0


def test_iam_principal_maps_to_a_stable_owner() -> None:
    context = {"authorizer": {"iam": {"userArn": "arn:aws:iam::123456789012:role/app"}}}
    assert caller_id(context) == caller_id(context)
    assert caller_id(context).version == 5
    assert caller_id({"authorizer": {"jwt": {"claims": {"sub": "auth0|42"}}}}) != caller_id(context)
    assert OWNER_NAMESPACE.version == 4


@pytest.mark.parametrize(
    ("raw_body", "expected_status", "phrase"),
    [
        ("{not json", 400, "not valid JSON"),
        ("[1, 2]", 400, "must be a JSON object"),
        ('{"type": "x", "owner": "me"}', 400, "owner: Extra inputs are not permitted"),
        ('{"type": "x", "user_id": "0d3f5a9e-2b6c-4e57-9c1a-7f2e8b4d6a10"}', 400, "user_id"),
        ('{"type": 7}', 400, "type: Input should be a valid string"),
        ('{"type": "x", "priority": "high"}', 400, "priority"),
        ('{"type": "x", "run_after": "2026-01-01T00:00:00"}', 400, "run_after"),
        ('{"type": "bad type!"}', 422, "invalid type"),
        ('{"type": "x", "max_attempts": 0}', 422, "max_attempts"),
        ('{"type": "x", "payload": {"s": "\\u0000"}}', 422, "NUL"),
        ("", 400, "needs a JSON body"),
        ('{"type": "x", "payload": ' + "[" * 5000 + "]" * 5000 + "}", 400, "nested too deeply"),
        ('{"type": "x", "payload": {"n": ' + "9" * 5000 + "}}", 400, "number too large"),
        ('{"type": "x", "priority": ' + "9" * 4400 + "}", 400, "number too large"),
    ],
)
def test_malformed_bodies_get_a_clear_4xx_and_write_nothing(
    call_api: Invoke,
    conn: psycopg.Connection,
    raw_body: str,
    expected_status: int,
    phrase: str,
) -> None:
    status, body = call_api("POST", "/jobs", raw_body=raw_body, sub=ALICE)
    assert status == expected_status, body
    assert phrase in body["message"]
    assert count_jobs(conn) == 0


def test_oversized_body_is_413(call_api: Invoke, conn: psycopg.Connection) -> None:
    big = json.dumps({"type": "x", "payload": {"blob": "a" * (MAX_PAYLOAD_BYTES + 5000)}})
    status, body = call_api("POST", "/jobs", raw_body=big, sub=ALICE)
    assert status == 413 and "over the limit" in body["message"]
    assert count_jobs(conn) == 0


def test_payload_just_over_the_limit_is_422(call_api: Invoke, conn: psycopg.Connection) -> None:
    body = {"type": "x", "payload": {"blob": "a" * MAX_PAYLOAD_BYTES}}
    status, answer = call_api("POST", "/jobs", body=body, sub=ALICE)
    assert status == 422 and answer["field"] == "payload"
    assert count_jobs(conn) == 0


def test_list_filters_and_paginates_with_a_cursor(call_api: Invoke) -> None:
    for n in range(5):
        call_api(
            "POST", "/jobs", body={"type": "a" if n % 2 else "b", "payload": {"n": n}}, sub=ALICE
        )

    status, first = call_api("GET", "/jobs", sub=ALICE, query={"limit": "2", "type": "a,b"})
    assert status == 200 and len(first["jobs"]) == 2 and first["next_cursor"]
    seen = [j["payload"]["n"] for j in first["jobs"]]
    cursor = first["next_cursor"]
    while cursor:
        _, page = call_api("GET", "/jobs", sub=ALICE, query={"limit": "2", "cursor": cursor})
        seen += [j["payload"]["n"] for j in page["jobs"]]
        cursor = page["next_cursor"]
    assert sorted(seen) == [0, 1, 2, 3, 4] and len(seen) == 5

    _, only_a = call_api("GET", "/jobs", sub=ALICE, query={"type": "a"})
    assert sorted(j["payload"]["n"] for j in only_a["jobs"]) == [1, 3]


# A list page's JSON stays within this many bytes (the README's API section): far under the
# response limit of an API Gateway's Lambda (6 MB) and the function's memory.
PAGE_BUDGET = 1024 * 1024


def test_a_page_of_the_largest_jobs_stays_small_and_paging_reaches_every_job_once(
    as_app: None, lambda_context: FakeContext, conn: psycopg.Connection
) -> None:
    """500 jobs, each with the largest payload, progress and result there are and a history
    of long non-ASCII errors: a page of them summarizes those values and stops at the
    budget, its cursor at the last job it holds; the job's own view has it all."""

    def get(path: str, query: dict[str, str] | None = None) -> tuple[int, str]:
        response = api.handler(http_event("GET", path, sub=ALICE, query=query), lambda_context)
        return response["statusCode"], response["body"]

    small = http_event("POST", "/jobs", body={"type": "small"}, sub=ALICE)
    assert api.handler(small, lambda_context)["statusCode"] == 202
    row = conn.execute("select user_id from tickq.jobs").fetchone()
    assert row is not None
    big_jobs(conn, row[0], 500)
    newest_first = "select id::text from tickq.jobs order by created_at desc, id desc"
    expected = [id_ for (id_,) in conn.execute(newest_first)]

    seen: list[str] = []
    sizes: list[int] = []
    cursor: str | None = None
    while True:
        query = {"limit": "500", **({"cursor": cursor} if cursor else {})}
        status, body = get("/jobs", query)
        assert status == 200, body[:300]
        sizes.append(len(body.encode()))
        page = json.loads(body)
        seen += [job["id"] for job in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert max(sizes) <= PAGE_BUDGET, sizes
    assert len(expected) == 501 and seen == expected  # every job once, newest first

    status, body = get("/jobs", {"limit": "1"})
    (listed,) = json.loads(body)["jobs"]
    left_out = {"payload", "result", "progress", "errors"}
    assert {name: listed[name] for name in left_out} == dict.fromkeys(left_out)
    assert set(listed["truncated"]) == {*left_out, "error"}
    assert listed["error"] == EMOJI * 200
    status, body = get(f"/jobs/{listed['id']}")
    whole = json.loads(body)
    assert status == 200 and whole["payload"]["text"] == WIDE * TEXT_CHARS
    assert len(whole["errors"]) == 20 and whole["result"] == WIDE * RESULT_CHARS


@pytest.mark.parametrize(
    ("query", "phrase"),
    [
        ({"limit": "many"}, "limit must be an integer"),
        ({"limit": "0"}, "limit"),
        ({"status": "lost"}, "status"),
        ({"cursor": "garbage"}, "cursor"),
        ({"colour": "red"}, "unknown query parameters: colour"),
    ],
)
def test_bad_list_queries_are_4xx(call_api: Invoke, query: dict[str, str], phrase: str) -> None:
    status, body = call_api("GET", "/jobs", sub=ALICE, query=query)
    assert 400 <= status < 500 and phrase in body["message"]


def test_cancel_then_retry_then_cancel_again(call_api: Invoke) -> None:
    _, job = call_api("POST", "/jobs", body={"type": "t"}, sub=ALICE)

    status, cancelled = call_api("POST", f"/jobs/{job['id']}/cancel", sub=ALICE)
    assert status == 200 and cancelled["status"] == "cancelled"

    status, again = call_api("POST", f"/jobs/{job['id']}/cancel", sub=ALICE)
    assert status == 409 and again["error"] == "InvalidTransition"

    status, retried = call_api("POST", f"/jobs/{job['id']}/retry", sub=ALICE)
    assert status == 200 and retried["status"] == "queued"


def test_unknown_job_id_and_route_are_404(call_api: Invoke) -> None:
    assert call_api("GET", f"/jobs/{uuid4()}", sub=ALICE)[0] == 404
    assert call_api("GET", "/jobs/not-a-uuid", sub=ALICE)[0] == 404
    assert call_api("GET", "/nowhere", sub=ALICE)[0] == 404


def test_an_event_that_is_not_http_is_400(as_app: None, lambda_context: FakeContext) -> None:
    for event in ({}, [], {"requestContext": {"http": "x"}}, "text"):
        response = api.handler(event, lambda_context)
        assert response["statusCode"] == 400
        assert "HTTP API" in json.loads(response["body"])["message"]


def test_database_down_is_503_without_internals(
    function_env: None, monkeypatch: pytest.MonkeyPatch, lambda_context: FakeContext
) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    response = api.handler(http_event("GET", "/jobs", sub=ALICE), lambda_context)
    body = json.loads(response["body"])
    assert response["statusCode"] == 503
    assert "127.0.0.1" not in body["message"]


def test_unexpected_failure_is_500_naming_only_the_request(
    call_api: Invoke, monkeypatch: pytest.MonkeyPatch, lambda_context: FakeContext
) -> None:
    from tickq.functions.http import api_routes

    def explode(**_: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(api_routes, "store", explode)
    status, body = call_api("GET", "/jobs", sub=ALICE)
    assert status == 500
    assert "secret" not in json.dumps(body)
    assert body["request_id"] == lambda_context.aws_request_id


@pytest.mark.parametrize(
    "authorizer",
    [None, "jwt", {"jwt": "claims"}, {"jwt": {"claims": ["sub"]}}, {"jwt": {"claims": {"sub": 7}}}],
)
def test_malformed_authorizer_context_is_401(
    as_app: None, lambda_context: FakeContext, authorizer: object
) -> None:
    event = http_event("GET", "/jobs", sub=ALICE)
    event["requestContext"]["authorizer"] = authorizer
    response = api.handler(event, lambda_context)
    assert response["statusCode"] == 401


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"body": "%%% not base64", "isBase64Encoded": True}, 400),
        ({"body": {"type": "x"}}, 400),
        ({"headers": ["x"]}, 400),
        ({"isBase64Encoded": "yes"}, 400),
    ],
)
def test_malformed_http_events_are_400_and_write_nothing(
    as_app: None,
    lambda_context: FakeContext,
    conn: psycopg.Connection,
    change: dict[str, object],
    status: int,
) -> None:
    event = {**http_event("POST", "/jobs", body={"type": "x"}, sub=ALICE), **change}
    response = api.handler(event, lambda_context)
    assert response["statusCode"] == status
    assert json.loads(response["body"])["message"]
    assert count_jobs(conn) == 0


def test_an_enqueue_into_a_full_queue_is_429_and_writes_nothing(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    Limits(conn).set_queue(queue_limit("default", max_depth=1))
    first, answer = call_api("POST", "/jobs", body={"type": "t"}, sub=ALICE)
    assert first == 202, answer

    status, problem = call_api("POST", "/jobs", body={"type": "t"}, sub=ALICE)

    assert status == 429
    assert problem["queue"] == "default" and "full" in problem["message"]
    assert count_jobs(conn) == 1


def test_a_job_posted_after_the_callers_own_job_waits_and_shows_its_family(
    call_api: Invoke,
) -> None:
    _, parent = call_api("POST", "/jobs", body={"type": "extract"}, sub=ALICE)

    status, child = call_api(
        "POST", "/jobs", body={"type": "embed", "after": [parent["id"]]}, sub=ALICE
    )

    assert status == 202 and child["status"] == "waiting"
    assert child["after"] == [{"id": parent["id"], "type": "extract", "status": "queued"}]
    _, fetched = call_api("GET", f"/jobs/{parent['id']}", sub=ALICE)
    assert fetched["children"] == [{"id": child["id"], "type": "embed", "status": "waiting"}]
    assert fetched["after"] == []


def test_another_users_job_is_not_found_as_a_parent(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    _, bobs = call_api("POST", "/jobs", body={"type": "extract"}, sub=BOB)

    status, body = call_api(
        "POST", "/jobs", body={"type": "embed", "after": [bobs["id"]]}, sub=ALICE
    )

    assert status == 422 and body["message"] == f"invalid after: job {bobs['id']} not found"
    assert count_jobs(conn) == 1
    assert conn.execute("select has_children from tickq.jobs").fetchone() == (False,)


def test_cancelling_a_waiting_job_through_the_api_cancels_its_descendants(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    _, a = call_api("POST", "/jobs", body={"type": "extract"}, sub=ALICE)
    _, b = call_api("POST", "/jobs", body={"type": "embed", "after": [a["id"]]}, sub=ALICE)
    _, c = call_api("POST", "/jobs", body={"type": "reindex", "after": [b["id"]]}, sub=ALICE)

    status, cancelled = call_api("POST", f"/jobs/{b['id']}/cancel", sub=ALICE)

    assert status == 200 and cancelled["status"] == "cancelled"
    _, grandchild = call_api("GET", f"/jobs/{c['id']}", sub=ALICE)
    assert grandchild["status"] == "cancelled"
    assert grandchild["error"] == f"parent {b['id']} is cancelled"


def test_a_queue_the_deployment_does_not_run_is_refused(
    call_api: Invoke, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, body = call_api("POST", "/jobs", body={"type": "x", "queue": "q-1970"}, sub=ALICE)
    assert (status, body["field"]) == (422, "queue"), body
    assert "default" in body["message"]
    monkeypatch.setenv("TICKQ_QUEUES", "default,bulk")
    assert call_api("POST", "/jobs", body={"type": "x", "queue": "bulk"}, sub=ALICE)[0] == 202
    assert count_jobs(conn) == 1


def test_a_start_in_the_past_becomes_now_and_a_future_one_is_kept(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    past = {"type": "x", "run_after": "1970-01-01T00:00:00Z"}
    status, job = call_api("POST", "/jobs", body=past, sub=ALICE)
    assert status == 202, job
    row = conn.execute(
        "select now() - run_after < interval '1 minute' from tickq.jobs where id = %s",
        (job["id"],),
    ).fetchone()
    assert row == (True,)
    # Within the 366 days an outside caller may look ahead (further is refused, see
    # tests/security/test_tenancy_bounds.py).
    ahead = (datetime.now(UTC) + timedelta(days=300)).date().isoformat()
    future = {"type": "x", "run_after": f"{ahead}T00:00:00Z"}
    status, job = call_api("POST", "/jobs", body=future, sub=ALICE)
    assert job["run_after"].startswith(ahead)


@pytest.mark.parametrize(
    ("method", "path", "options"),
    [
        ("POST", "/jobs", {"body": {"type": "x"}}),
        ("GET", "/jobs", {}),
        ("GET", "/jobs/0d3f5a9e-2b6c-4e57-9c1a-7f2e8b4d6a10", {}),
        ("POST", "/jobs", {"raw_body": "{"}),
        ("GET", "/me", {}),
        ("GET", "/nowhere", {}),
    ],
)
def test_api_answers_are_never_cached_nor_sniffed(
    as_app: None, lambda_context: FakeContext, method: str, path: str, options: dict
) -> None:
    response = api.handler(http_event(method, path, sub=ALICE, **options), lambda_context)
    headers = {k.lower(): v for k, v in response["headers"].items()}
    assert headers["cache-control"] == "no-store", response
    assert headers["x-content-type-options"] == "nosniff"


def test_the_not_http_answer_is_never_cached_either(lambda_context: FakeContext) -> None:
    response = api.handler({"not": "http"}, lambda_context)
    assert response["headers"]["Cache-Control"] == "no-store"


def test_a_request_that_adds_no_metric_flushes_none_and_warns_nothing(
    call_api: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Powertools' empty flush would warn

        status, _ = call_api("GET", "/jobs", sub=ALICE)

    assert status == 200
    assert '"_aws"' not in capsys.readouterr().out  # no embedded-metric-format line


@pytest.mark.usefixtures("aws")
def test_a_new_job_kicks_the_tick_function_within_the_request(
    call_api: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKQ_KICK_FUNCTION", "tickq-tick")
    lambda_function("tickq-tick")
    kicks = record_invokes()

    status, _ = call_api("POST", "/jobs", sub=ALICE, body={"type": "t"})

    assert status == 202
    assert kicks == [{"function": "tickq-tick", "source": "tickq.kick"}]
