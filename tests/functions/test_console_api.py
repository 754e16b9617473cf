"""The console's routes of ApiFunction against real PostgreSQL: users act on their own jobs
only, operators (on a login in tickq_app and tickq_operator) on everyone's, and bad input
changes nothing."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from queue_core import PostgresStore
from queue_core.model.validation import job_spec
from tests.operator_scenes import durable_pipeline, leaked
from tickq.functions import api

from .big_jobs import EMOJI, big_jobs
from .conftest import SAMPLE_ISSUER, FakeContext, http_event

ALICE = uuid4()
BOB = uuid4()
OLIVIA = uuid4()


def kill(conn: psycopg.Connection, owner: UUID | None, type_: str = "embed") -> str:
    store = PostgresStore(conn)
    job_id = store.enqueue(job_spec(type_, {}, max_attempts=1, user_id=owner)).id
    (job,) = store.claim(limit=1)
    store.fail(job, "boom")
    return str(job_id)


def status(conn: psycopg.Connection, job_id: str) -> str:
    row = conn.execute("select status from tickq.jobs where id = %s", (job_id,)).fetchone()
    assert row is not None
    return str(row[0])


@pytest.fixture
def api_login_url(database_url: str) -> Iterator[str]:
    """ApiFunction's login as the operations guide says: tickq_app and tickq_operator."""
    name = f"tickq_api_{secrets.token_hex(4)}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("create role {} login in role tickq_app, tickq_operator").format(
                sql.Identifier(name)
            )
        )
    yield make_conninfo(database_url, user=name)
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", (name,)
        )
        admin.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))


@pytest.fixture
def call(
    function_env: None,
    monkeypatch: pytest.MonkeyPatch,
    api_login_url: str,
    lambda_context: FakeContext,
):
    monkeypatch.setenv("TICKQ_DATABASE_URL", api_login_url)
    monkeypatch.setenv("TICKQ_OPERATORS", f"{SAMPLE_ISSUER}|{OLIVIA}")

    def invoke(method: str, path: str, **options: Any) -> tuple[int, Any]:
        response = api.handler(http_event(method, path, **options), lambda_context)
        body = response.get("body")
        return response["statusCode"], json.loads(body) if body else None

    return invoke


def test_a_user_retries_a_selection_of_their_own_jobs_only(call, conn) -> None:
    mine, theirs = kill(conn, ALICE), kill(conn, BOB)

    code, body = call(
        "POST", "/jobs/actions", body={"action": "retry", "ids": [mine, theirs]}, sub=ALICE
    )

    assert code == 200
    assert [(r["id"], r["outcome"]) for r in body["results"]] == [
        (mine, "retried"),
        (theirs, "not found"),
    ]
    assert (status(conn, mine), status(conn, theirs)) == ("queued", "dead")


def test_users_may_not_use_the_operator_routes(call, conn) -> None:
    dead = kill(conn, BOB)
    for method, path, body in (
        ("POST", "/admin/jobs/actions", {"action": "retry", "ids": [dead]}),
        ("POST", "/admin/queues/default/pause", None),
        ("GET", "/admin/jobs", None),
        ("GET", f"/admin/jobs/{dead}", None),
        ("GET", "/admin/charts", None),
        ("POST", "/admin/dead/retry", {"expected": 1}),
    ):
        code, answer = call(method, path, body=body, sub=ALICE)
        assert (code, answer["error"]) == (403, "NotOperator"), path
    assert status(conn, dead) == "dead"
    assert conn.execute("select count(*) from tickq.queue_pauses").fetchone() == (0,)


def test_an_operator_acts_on_every_users_jobs(call, conn) -> None:
    dead = [kill(conn, ALICE), kill(conn, BOB), kill(conn, None)]

    code, body = call(
        "POST", "/admin/jobs/actions", body={"action": "retry", "ids": dead}, sub=OLIVIA
    )

    assert code == 200
    assert [r["outcome"] for r in body["results"]] == ["retried"] * 3
    assert [status(conn, i) for i in dead] == ["queued"] * 3
    code, listing = call("GET", "/admin/jobs", query={"status": "queued"}, sub=OLIVIA)
    assert {j["id"] for j in listing["jobs"]} == set(dead)
    assert all("payload" not in j for j in listing["jobs"])


def test_an_operators_page_of_the_largest_jobs_stays_small_and_reaches_every_job_once(
    call, conn, lambda_context
) -> None:
    """Every user's list summarizes progress and cuts errors as the owner's does, and stops
    at the same byte budget, its cursor at the last job it holds."""
    for owner in (ALICE, BOB, None):
        big_jobs(conn, owner, 167)
    newest_first = "select id::text from tickq.jobs order by created_at desc, id desc"
    expected = [id_ for (id_,) in conn.execute(newest_first)]

    seen: list[str] = []
    sizes: list[int] = []
    cursor = None
    while True:
        query = {"limit": "500", **({"cursor": cursor} if cursor else {})}
        event = http_event("GET", "/admin/jobs", sub=OLIVIA, query=query)
        response = api.handler(event, lambda_context)
        assert response["statusCode"] == 200, response["body"][:300]
        sizes.append(len(response["body"].encode()))
        page = json.loads(response["body"])
        seen += [job["id"] for job in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert max(sizes) <= 1024 * 1024, sizes  # the budget of test_api.py's owner's list
    assert len(expected) == 501 and seen == expected

    _, first = call("GET", "/admin/jobs", query={"limit": "1"}, sub=OLIVIA)
    (listed,) = first["jobs"]
    assert (listed["progress"], listed["error"]) == (None, EMOJI * 200)
    assert set(listed["truncated"]) == {"progress", "error"}
    assert "payload" not in listed and "result" not in listed


def test_an_operator_reads_any_users_job_with_steps_and_graph_and_no_payload(call, conn) -> None:
    # Given Alice's durable job between a parent and a child, secrets everywhere
    pipeline = durable_pipeline(conn, ALICE)

    # When the operator and Bob ask for its detail
    code, detail = call("GET", f"/admin/jobs/{pipeline.job}", sub=OLIVIA)
    refused, _ = call("GET", f"/admin/jobs/{pipeline.job}", sub=BOB)

    # Then the operator gets its steps, wait and graph, and none of Alice's data; Bob nothing
    assert code == 200 and refused == 403
    assert [s["name"] for s in detail["steps"]] == ["fetch", "part:0"]
    assert detail["waiting_for"]["name"] == "approve"
    assert [p["id"] for p in detail["after"]] == [str(pipeline.parent)]
    assert [c["id"] for c in detail["children"]] == [str(pipeline.child)]
    assert leaked(json.dumps(detail)) == []
    missing, _ = call("GET", f"/admin/jobs/{uuid4()}", sub=OLIVIA)
    assert missing == 404


def test_an_operator_pauses_and_resumes_a_queue(call, conn) -> None:
    code, paused = call("POST", "/admin/queues/default/pause", sub=OLIVIA)
    assert (code, paused["queue"], paused["paused_by"]) == (200, "default", str(OLIVIA))
    code, listed = call("GET", "/admin/queues", sub=OLIVIA)
    assert [p["queue"] for p in listed["pauses"]] == ["default"]

    code, _ = call("POST", "/admin/queues/default/resume", sub=OLIVIA)
    assert code == 200
    code, again = call("POST", "/admin/queues/default/resume", sub=OLIVIA)
    assert (code, again["error"]) == (409, "QueueNotPaused")


def test_retry_all_dead_refuses_a_stale_count(call, conn) -> None:
    dead = [kill(conn, ALICE, "transcribe"), kill(conn, BOB, "transcribe")]
    code, counted = call("GET", "/admin/dead/count", query={"type": "transcribe"}, sub=OLIVIA)
    assert (code, counted["count"]) == (200, 2)

    code, stale = call(
        "POST", "/admin/dead/retry", body={"type": "transcribe", "expected": 3}, sub=OLIVIA
    )
    assert (code, stale["current"]) == (409, 2)
    assert [status(conn, i) for i in dead] == ["dead", "dead"]

    code, done = call(
        "POST", "/admin/dead/retry", body={"type": "transcribe", "expected": 2}, sub=OLIVIA
    )
    assert code == 200 and len(done["results"]) == 2
    assert [status(conn, i) for i in dead] == ["queued", "queued"]


def test_the_charts_of_the_last_hour_and_day(call, conn) -> None:
    kill(conn, ALICE)
    code, hour = call("GET", "/admin/charts", sub=OLIVIA)
    assert code == 200 and len(hour["throughput"]) == 60
    assert sum(b["dead"] for b in hour["throughput"]) == 1
    code, day = call("GET", "/admin/charts", query={"window": "day"}, sub=OLIVIA)
    assert code == 200 and len(day["throughput"]) == 24


@pytest.mark.parametrize(
    ("method", "path", "options", "expected"),
    [
        ("POST", "/jobs/actions", {"body": {"action": "delete", "ids": []}}, 400),
        ("POST", "/jobs/actions", {"body": {"action": "retry", "ids": ["x"]}}, 422),
        ("POST", "/jobs/actions", {"body": {"action": "retry", "ids": []}}, 422),
        (
            "POST",
            "/jobs/actions",
            {"body": {"action": "retry", "ids": [str(uuid4()) for _ in range(501)]}},
            422,
        ),
        ("POST", "/jobs/actions", {"raw_body": "{"}, 400),
        ("GET", "/jobs", {"query": {"from": "yesterday"}}, 400),
        ("GET", "/jobs", {"query": {"from": "2030-01-01T00:00:00"}}, 400),
        ("GET", "/jobs", {"query": {"error": "x" * 201}}, 422),
        ("GET", "/jobs", {"query": {"status": "deadish"}}, 422),
        ("GET", "/jobs", {"query": {"sort": "id"}}, 400),
    ],
)
def test_bad_console_input_is_refused_and_changes_nothing(
    call, conn, method, path, options, expected
) -> None:
    dead = kill(conn, ALICE)
    code, body = call(method, path, sub=ALICE, **options)
    assert code == expected, body
    assert status(conn, dead) == "dead"


@pytest.mark.parametrize(
    ("path", "options", "expected"),
    [
        ("/admin/queues/bad%20queue/pause", {}, 422),
        ("/admin/queues/default/pause", {"body": {"reason": "x" * 501}}, 422),
        ("/admin/queues/default/pause", {"body": {"why": "x"}}, 400),
        ("/admin/dead/retry", {"body": {"expected": 0}}, 422),
        ("/admin/dead/retry", {"body": {"expected": "2"}}, 400),
        ("/admin/jobs/actions", {"body": {"action": "cancel", "ids": ["nope"]}}, 422),
    ],
)
def test_bad_operator_input_is_refused_and_changes_nothing(
    call, conn, path, options, expected
) -> None:
    dead = kill(conn, ALICE)
    code, body = call("POST", path, sub=OLIVIA, **options)
    assert code == expected, body
    assert status(conn, dead) == "dead"
    assert conn.execute("select count(*) from tickq.queue_pauses").fetchone() == (0,)


def test_the_job_list_filters_by_creation_time(call, conn) -> None:
    store = PostgresStore(conn)
    now = store.now()
    old = store.enqueue(job_spec("embed", {}, user_id=ALICE), now=now - timedelta(hours=2)).id
    new = store.enqueue(job_spec("embed", {}, user_id=ALICE), now=now).id
    since = (now - timedelta(hours=1)).isoformat()

    code, body = call("GET", "/jobs", query={"from": since}, sub=ALICE)

    assert code == 200
    assert [j["id"] for j in body["jobs"]] == [str(new)]
    code, body = call("GET", "/jobs", query={"to": since}, sub=ALICE)
    assert [j["id"] for j in body["jobs"]] == [str(old)]


def test_an_operator_sees_the_outbox_backlog_and_no_event(call, conn) -> None:
    assert call("GET", "/admin/outbox", sub=OLIVIA) == (
        200,
        {"pending": 0, "oldest_seconds": None, "most_attempts": 0},
    )
    kill(conn, ALICE)
    kill(conn, BOB)

    status_code, backlog = call("GET", "/admin/outbox", sub=OLIVIA)

    assert status_code == 200
    assert backlog["pending"] == 2 and backlog["oldest_seconds"] >= 0
    assert call("GET", "/admin/outbox", sub=ALICE)[0] == 403


# Flow limits and holds


def flow_rows(conn: psycopg.Connection) -> tuple[list[Any], list[Any]]:
    limits = conn.execute("select prefix, max_running, rate_limit from tickq.flow_limits")
    holds = conn.execute("select key from tickq.flow_holds")
    return sorted(limits.fetchall()), sorted(holds.fetchall())


def test_an_operator_sets_lists_holds_and_clears_flow_limits(call, conn) -> None:
    store = PostgresStore(conn)
    for keys in (["shop:a"], ["shop:a"], ["other"]):
        store.enqueue(job_spec("sync", {}, flow_keys=keys, user_id=ALICE))

    code, limit = call(
        "POST",
        "/admin/flow/limits",
        body={"prefix": "shop:", "max_running": 2, "rate": "10/min"},
        sub=OLIVIA,
    )
    assert (code, limit) == (
        200,
        {"prefix": "shop:", "max_running": 2, "rate_limit": 10, "rate_period_seconds": 60.0},
    )
    code, held = call(
        "POST", "/admin/flow/hold", body={"key": "shop:a", "seconds": 300}, sub=OLIVIA
    )
    assert code == 200 and held["key"] == "shop:a" and held["held_until"]

    code, flow = call("GET", "/admin/flow", sub=OLIVIA)

    assert code == 200
    assert [row["prefix"] for row in flow["limits"]] == ["shop:"]
    keys = {row["key"]: row for row in flow["keys"]}
    assert (keys["shop:a"]["waiting"], keys["shop:a"]["running"]) == (2, 0)
    assert keys["shop:a"]["prefix"] == "shop:" and keys["shop:a"]["held_until"]
    assert keys["other"]["prefix"] is None and keys["other"]["held_until"] is None
    code, cleared = call("POST", "/admin/flow/clear", body={"prefix": "shop:"}, sub=OLIVIA)
    assert (code, cleared) == (200, {"cleared": "shop:"})
    code, again = call("POST", "/admin/flow/clear", body={"prefix": "shop:"}, sub=OLIVIA)
    assert (code, again["error"]) == (404, "LimitNotFound")
    assert flow_rows(conn) == ([], [("shop:a",)])


def test_users_may_not_see_or_change_flow_limits(call, conn) -> None:
    for method, path, body in (
        ("GET", "/admin/flow", None),
        ("POST", "/admin/flow/limits", {"prefix": "shop:", "max_running": 1}),
        ("POST", "/admin/flow/hold", {"key": "shop:a", "seconds": 60}),
        ("POST", "/admin/flow/clear", {"prefix": "shop:"}),
    ):
        code, answer = call(method, path, body=body, sub=ALICE)
        assert (code, answer["error"]) == (403, "NotOperator"), path
    assert flow_rows(conn) == ([], [])


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        ("/admin/flow/limits", {"prefix": "shop:"}, 422),
        ("/admin/flow/limits", {"prefix": "has space", "max_running": 1}, 422),
        ("/admin/flow/limits", {"prefix": "shop:", "max_running": 0}, 422),
        ("/admin/flow/limits", {"prefix": "shop:", "rate": "often"}, 422),
        ("/admin/flow/limits", {"prefix": "shop:", "max_running": "2"}, 400),
        ("/admin/flow/limits", {"prefix": "shop:", "max_running": 1, "why": "x"}, 400),
        ("/admin/flow/hold", {"key": "shop:a", "seconds": 86_401}, 422),
        ("/admin/flow/hold", {"key": "x" * 241, "seconds": 60}, 422),
        ("/admin/flow/hold", {"key": "shop:a"}, 400),
        ("/admin/flow/clear", {}, 400),
    ],
)
def test_bad_flow_input_is_refused_and_changes_nothing(call, conn, path, body, expected) -> None:
    code, answer = call("POST", path, body=body, sub=OLIVIA)

    assert code == expected, answer
    assert flow_rows(conn) == ([], [])


def test_the_operators_job_detail_says_which_flow_key_holds_it(call, conn) -> None:
    store = PostgresStore(conn)
    held = store.enqueue(job_spec("sync", {}, flow_keys=["shop:a"], user_id=ALICE)).id
    free = store.enqueue(job_spec("sync", {}, flow_keys=["shop:b"], user_id=ALICE)).id
    call("POST", "/admin/flow/hold", body={"key": "shop:a", "seconds": 300}, sub=OLIVIA)

    _, detail = call("GET", f"/admin/jobs/{held}", sub=OLIVIA)
    _, other = call("GET", f"/admin/jobs/{free}", sub=OLIVIA)
    _, own = call("GET", f"/jobs/{held}", sub=ALICE)

    assert detail["held_by_flow_key"] == "shop:a"
    assert other["held_by_flow_key"] is None
    assert own["held_by_flow_key"] == "shop:a"
