"""Operator commands against a real database: `tickq stats --watch`, bulk retry in chunks,
plain output when piped, `tickq demo --user`, and the operator endpoint's gate."""

from __future__ import annotations

import json
import secrets
from typing import Any

import psycopg
import pytest

from queue_core import PostgresStore, Registry, Status
from tickq.infra.cli import jobs as cli_jobs
from tickq.infra.cli import program as cli
from tickq.infra.local.serve import DevIdentity, LocalContext, handler_database_url, http_api_event


@pytest.fixture
def tickq(conn: psycopg.Connection, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    return cli.main


def make_dead(conn: psycopg.Connection, count: int, type_: str = "embed") -> list[str]:
    store = PostgresStore(conn)
    specs = Registry()
    ids = []
    for n in range(count):
        store.enqueue(specs.spec(type_, {"n": n}, max_attempts=1))
        (job,) = store.claim(limit=1)
        store.fail(job, f"boom {n}")
        ids.append(str(job.id))
    return ids


def test_stats_watch_prints_one_json_line_per_refresh(
    tickq: Any, conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    make_dead(conn, 1)

    code = tickq(["stats", "--watch", "--count", "3", "--interval", "0", "--json"])

    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and len(lines) == 3
    snapshots = [json.loads(line) for line in lines]
    assert all(s["stats"][0]["status"] == "dead" and s["stats"][0]["count"] == 1 for s in snapshots)


def test_bulk_retry_takes_every_dead_job_in_chunks(
    tickq: Any,
    conn: psycopg.Connection,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given 5 dead embed jobs, 1 dead reindex job, and chunks of 2
    make_dead(conn, 5)
    make_dead(conn, 1, "reindex")
    monkeypatch.setattr(cli_jobs, "RETRY_CHUNK", 2)

    # When the dead embed jobs are retried in bulk
    code = tickq(["--json", "retry", "--dead", "--type", "embed"])

    # Then all five are queued with fresh attempts, and the reindex job is still dead
    retried = json.loads(capsys.readouterr().out)
    assert code == 0 and len(retried) == 5
    store = PostgresStore(conn)
    assert {store.get(j["id"]).status for j in retried} == {Status.QUEUED}
    assert [j.type for j in store.list_jobs(statuses=["dead"]).jobs] == ["reindex"]


def test_bulk_retry_stops_at_the_limit(
    tickq: Any, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_dead(conn, 4)
    monkeypatch.setattr(cli_jobs, "RETRY_CHUNK", 3)

    assert tickq(["retry", "--dead", "--limit", "2"]) == 0

    assert len(PostgresStore(conn).list_jobs(statuses=["dead"]).jobs) == 2


def test_piped_output_has_no_colour_codes(
    tickq: Any, conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    make_dead(conn, 1)

    assert tickq(["stats"]) == 0 and tickq(["dead"]) == 0

    captured = capsys.readouterr()
    assert "dead" in captured.out
    assert "\x1b[" not in captured.out + captured.err


def test_serve_refuses_a_bad_user_before_touching_anything(
    tickq: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tickq(["serve", "--user", "not a name!"]) == cli.EXIT_INPUT
    assert "UUID or a name" in capsys.readouterr().err


def test_demo_jobs_belong_to_the_given_user(
    tickq: Any, conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    tickq(["--json", "demo", "--user", "alice"])

    jobs = json.loads(capsys.readouterr().out)["jobs"]
    owner = str(DevIdentity("alice").owner_id())
    assert jobs and {j["user_id"] for j in jobs} == {owner}


@pytest.mark.parametrize(
    ("identity", "status"),
    [(DevIdentity("alice"), 403), (DevIdentity("olivia", operator_group="tickq-operators"), 200)],
    ids=["user", "operator"],
)
def test_operator_endpoint_is_only_for_operators(
    conn: psycopg.Connection,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    identity: DevIdentity,
    status: int,
) -> None:
    from tickq.functions import db
    from tickq.infra.local.serve import api_handler

    make_dead(conn, 2)
    monkeypatch.setenv("TICKQ_DATABASE_URL", handler_database_url(conn, database_url, "tickq_app"))
    monkeypatch.delenv("TICKQ_OPERATOR_GROUPS", raising=False)
    event = http_api_event(
        method="GET", target="/admin/stats", headers={}, body=b"", identity=identity
    )
    try:
        response = api_handler()(event, LocalContext())
    finally:
        db.discard()

    assert response["statusCode"] == status
    if status == 200:
        (queue,) = json.loads(response["body"])["queues"]
        assert (queue["queue"], queue["dead"], queue["depth"]) == ("default", 2, 0)


@pytest.mark.parametrize(
    ("roles", "status"),
    [(["tickq_app"], 403), (["tickq_app", "tickq_operator"], 200)],
    ids=["app-only", "as-the-guide-says"],
)
def test_operator_endpoint_needs_only_tickq_operator_and_the_login_cannot_become_worker(
    conn: psycopg.Connection,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    roles: list[str],
    status: int,
) -> None:
    # Given ApiFunction logged in as the operations guide says (tickq_app, tickq_operator)
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    from tickq.functions import db
    from tickq.infra.local.serve import api_handler

    make_dead(conn, 2)
    login = f"tickq_api_{secrets.token_hex(4)}"
    conn.execute(sql.SQL("create role {} login").format(sql.Identifier(login)))
    for role in roles:
        conn.execute(sql.SQL("grant {} to {}").format(sql.Identifier(role), sql.Identifier(login)))
    url = make_conninfo(database_url, user=login)
    monkeypatch.setenv("TICKQ_DATABASE_URL", url)
    operator = DevIdentity("olivia", operator_group="tickq-operators")
    event = http_api_event(
        method="GET", target="/admin/stats", headers={}, body=b"", identity=operator
    )
    try:
        # When an operator asks for the overview
        response = api_handler()(event, LocalContext())
        # Then the counts come only with tickq_operator, and the login can never take
        # the worker role nor read or change another user's rows
        with psycopg.connect(url, autocommit=True) as api_login:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                api_login.execute("set role tickq_worker")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                api_login.execute("select tickq.queue_admit(array['default'], array[1])")
            assert api_login.execute("select count(*) from tickq.jobs").fetchone() == (0,)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                api_login.execute("update tickq.jobs set status = 'queued'")
    finally:
        db.discard()
        conn.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", (login,)
        )
        conn.execute(sql.SQL("drop role {}").format(sql.Identifier(login)))

    assert response["statusCode"] == status, response["body"]
    body = json.loads(response["body"])
    if status == 200:
        (queue,) = body["queues"]
        assert (queue["queue"], queue["dead"], queue["depth"]) == ("default", 2, 0)
    else:
        assert "permission denied for function operator_stats" in body["message"]
