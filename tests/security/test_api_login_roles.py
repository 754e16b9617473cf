"""ApiFunction under every login a deployment might give it: a superuser, the table's owner,
a role with BYPASSRLS or the worker's privileges, a plain tickq_app member. Each either
scopes users (Bob gets 404 for Alice's job, through the API and the page's own calls) or
refuses to serve with 503 and a log line naming the fix; none leaks."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from queue_core import PostgresStore
from queue_core.migrate import migrate
from queue_core.model import validation
from tests.functions.conftest import FakeContext, http_event
from tickq.functions import api, db
from tickq.infra.local import postgres as localdb
from tickq.infra.local.postgres import create_database, drop_database

ALICE, BOB = str(uuid4()), str(uuid4())


def call(method: str, path: str, **options: Any) -> tuple[int, Any]:
    response = api.handler(http_event(method, path, **options), FakeContext())
    return response["statusCode"], json.loads(response["body"])


def assert_scoped(admin_url: str) -> None:
    """Alice's job is hers alone: Bob gets 404 on every route and an empty list and page."""
    status, job = call("POST", "/jobs", body={"type": "report"}, sub=ALICE)
    assert status == 202, job
    for method, suffix in [("GET", ""), ("POST", "/cancel"), ("POST", "/retry")]:
        status, body = call(method, f"/jobs/{job['id']}{suffix}", sub=BOB)
        assert (status, body["error"]) == (404, "JobNotFound"), (method, suffix, body)
    assert call("GET", "/jobs", sub=BOB) == (200, {"jobs": [], "next_cursor": None})
    status, me = call("GET", "/me", sub=BOB)  # what the page asks first
    assert (status, me["user_id"]) == (200, BOB)
    assert call("GET", f"/jobs/{job['id']}", sub=ALICE)[0] == 200
    with psycopg.connect(admin_url) as admin:
        row = admin.execute("select status from tickq.jobs where id = %s", (job["id"],))
        assert row.fetchone() == ("queued",)


def assert_refused(caplog: pytest.LogCaptureFixture, login: str, reason: str) -> None:
    caplog.clear()
    status, body = call("GET", "/jobs", sub=BOB)
    assert (status, body["error"]) == (503, "LoginBypassesSecurity"), body
    assert call("POST", "/jobs", body={"type": "report"}, sub=ALICE)[0] == 503
    logged = caplog.text
    assert f"the database login {login} {reason}" in logged
    assert f"fix: grant tickq_app to {login}" in logged


@pytest.fixture
def api_env(function_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    yield monkeypatch
    db.discard()


@pytest.fixture
def login(database_url: str) -> Iterator[Any]:
    """Factory of LOGIN roles with the given attributes; dropped after the test."""
    made: list[str] = []

    def make(attributes: str = "", member_of: str | None = None) -> tuple[str, str]:
        name = f"tickq_test_{secrets.token_hex(4)}"
        made.append(name)
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("create role {} login " + attributes).format(sql.Identifier(name))
            )
            if member_of:
                admin.execute(
                    sql.SQL("grant {} to {}").format(
                        sql.Identifier(member_of), sql.Identifier(name)
                    )
                )
        return name, make_conninfo(database_url, user=name)

    yield make
    db.discard()
    with psycopg.connect(database_url, autocommit=True) as admin:
        for name in made:
            admin.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity where usename = %s",
                (name,),
            )
            if admin.execute("select 1 from pg_roles where rolname = %s", (name,)).fetchone():
                admin.execute(sql.SQL("drop owned by {}").format(sql.Identifier(name)))
            admin.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(name)))


def test_a_superuser_login_acts_as_tickq_app(
    api_env: pytest.MonkeyPatch, database_url: str, tasks: object
) -> None:
    api_env.setenv("TICKQ_DATABASE_URL", database_url)
    assert_scoped(database_url)


def test_a_plain_tickq_app_member_is_scoped(
    api_env: pytest.MonkeyPatch, app_login_url: str, database_url: str, tasks: object
) -> None:
    api_env.setenv("TICKQ_DATABASE_URL", app_login_url)
    assert_scoped(database_url)


@pytest.mark.parametrize(
    ("attributes", "member_of", "reason"),
    [
        ("bypassrls", None, "has BYPASSRLS"),
        ("", "tickq_worker", "has the privileges of tickq_worker"),
    ],
    ids=["bypassrls", "worker-member"],
)
def test_a_login_that_bypasses_security_and_cannot_act_as_app_is_refused(
    api_env: pytest.MonkeyPatch,
    login: Any,
    caplog: pytest.LogCaptureFixture,
    attributes: str,
    member_of: str | None,
    reason: str,
    clean_tables: None,
    tasks: object,
    conn: psycopg.Connection,
) -> None:
    name, url = login(attributes, member_of)
    # What a hand-made login for everything would hold: the schema and the table.
    conn.execute(sql.SQL("grant usage on schema tickq to {}").format(sql.Identifier(name)))
    conn.execute(sql.SQL("grant all on tickq.jobs to {}").format(sql.Identifier(name)))
    api_env.setenv("TICKQ_DATABASE_URL", url)
    assert_refused(caplog, name, reason)
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (0,)


def test_the_same_logins_with_tickq_app_granted_are_scoped(
    api_env: pytest.MonkeyPatch, login: Any, database_url: str, clean_tables: None, tasks: object
) -> None:
    _, url = login("bypassrls", "tickq_app")
    api_env.setenv("TICKQ_DATABASE_URL", url)
    assert_scoped(database_url)


@pytest.fixture
def owned_database(pg_admin_url: str, login: Any) -> Iterator[tuple[str, str, str]]:
    """A database migrated by a non-superuser login that owns every tickq table, as on a
    managed server where the master login runs the migrations: (owner, its URL, admin URL)."""
    owner, _ = login("createdb")
    name = f"tickq_owned_{secrets.token_hex(4)}"
    create_database(pg_admin_url, name)
    admin_url = localdb.database_url(pg_admin_url, name)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("alter database {} owner to {}").format(
                sql.Identifier(name), sql.Identifier(owner)
            )
        )
    owner_url = make_conninfo(admin_url, user=owner)
    try:
        with psycopg.connect(owner_url) as conn:
            migrate(conn)
        yield owner, owner_url, admin_url
    finally:
        db.discard()
        drop_database(pg_admin_url, name)


def test_the_table_owners_login_is_refused_until_it_may_act_as_app_then_scoped(
    api_env: pytest.MonkeyPatch,
    owned_database: tuple[str, str, str],
    caplog: pytest.LogCaptureFixture,
    tasks: object,
) -> None:
    owner, owner_url, admin_url = owned_database
    with psycopg.connect(admin_url) as admin:
        row = admin.execute(
            "select relforcerowsecurity, pg_get_userbyid(relowner) from pg_class"
            " where oid = 'tickq.jobs'::regclass"
        ).fetchone()
    assert row == (True, owner)
    api_env.setenv("TICKQ_DATABASE_URL", owner_url)

    # The owner could not grant itself tickq_app while migrating (no CREATEROLE): refused.
    assert_refused(caplog, owner, "owns tickq.jobs")

    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("grant tickq_app to {}").format(sql.Identifier(owner)))
    assert_scoped(admin_url)


def test_workers_on_the_owners_login_still_see_every_row_under_forced_security(
    owned_database: tuple[str, str, str],
) -> None:
    _, owner_url, _ = owned_database
    with psycopg.connect(owner_url, autocommit=True) as conn:
        store = PostgresStore(conn)
        for user in (ALICE, BOB):
            store.enqueue(validation.job_spec("report", user_id=user))
        claimed = store.claim(limit=10)
    assert sorted(str(job.user_id) for job in claimed) == sorted([ALICE, BOB])


def test_user_transactions_act_as_tickq_app_and_the_role_ends_with_them(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn, user_id=uuid4())
    assert store.list_jobs().jobs == []
    with conn.transaction():
        conn.execute("select set_config('tickq.user_id', %s, true)", (ALICE,))
        conn.execute("select tickq.act_as_app()")
        assert conn.execute("select current_user").fetchone() == ("tickq_app",)
    assert conn.execute("select current_user <> 'tickq_app'").fetchone() == (True,)


def test_a_database_built_on_the_owners_login_gives_the_owner_every_users_jobs(
    pg_admin_url: str, login: Any
) -> None:
    # Given a new database owned by a non-superuser login, built from the current-state
    # files on that login (the owner's policies name it, whatever it is called)
    owner, _ = login("createdb")
    name = f"tickq_owned_{secrets.token_hex(4)}"
    create_database(pg_admin_url, name)
    admin_url = localdb.database_url(pg_admin_url, name)
    try:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("alter database {} owner to {}").format(
                    sql.Identifier(name), sql.Identifier(owner)
                )
            )
        owner_url = make_conninfo(admin_url, user=owner)
        with psycopg.connect(owner_url) as conn:
            migrate(conn)

        # When the owner writes the jobs of several users under forced row-level security
        with psycopg.connect(owner_url, autocommit=True) as conn:
            conn.execute(
                "insert into tickq.jobs (type, user_id, status, finished_at)"
                " select 't', ('00000000-0000-0000-0000-00000000000' || (g % 3))::uuid,"
                "  case when g % 4 = 0 then 'queued' else 'succeeded' end,"
                "  case when g % 4 = 0 then null else now() - g * interval '1 minute' end"
                " from generate_series(1, 90) g"
            )
            seen = conn.execute("select count(distinct user_id), count(*) from tickq.jobs")

            # Then it sees every user's jobs, and a worker's login claims any of them
            assert seen.fetchone() == (3, 90)
        worker, _ = login("", "tickq_worker")
        with psycopg.connect(make_conninfo(admin_url, user=worker), autocommit=True) as work:
            claimed = PostgresStore(work).claim(limit=30)
        assert len(claimed) == 22 and len({job.user_id for job in claimed}) == 3
    finally:
        db.discard()
        drop_database(pg_admin_url, name)
