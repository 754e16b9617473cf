"""The operator's view of one job of any user, against PostgreSQL: its steps, wait, parents
and children through the security-definer functions, the same as its owner sees them, and
never its payload, result, a step's result or a signal's payload; every other role is
refused those functions, and the shared views keep an application user to their own jobs."""

from __future__ import annotations

import json
from uuid import UUID, uuid4

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from queue_core import PostgresStore
from queue_core.console.jobs import OperatorConsole
from queue_core.errors import InvalidJob, JobNotFound
from queue_core.model.dependencies import family
from tests.operator_scenes import durable_pipeline, leaked

ALICE = UUID("00000000-0000-0000-0000-00000000a11c")
BOB = UUID("00000000-0000-0000-0000-000000000b0b")
OPERATOR_FUNCTIONS = ("tickq.operator_job_durable", "tickq.operator_job_relatives")


def test_an_operator_reads_another_users_steps_wait_and_graph_and_no_payload(conn, operator_url):
    # Given Alice's durable job between a parent and a child, secrets everywhere
    pipeline = durable_pipeline(conn, ALICE)

    # When an operator login (tickq_operator, no row of tickq.jobs) opens its detail
    with psycopg.connect(operator_url, autocommit=True) as operator:
        detail = OperatorConsole(operator).job(pipeline.job)

    # Then it has the job's owner, steps by name and size, its wait, signals and graph
    assert (detail["user_id"], detail["type"], detail["status"]) == (
        str(ALICE),
        "transcribe",
        "queued",
    )
    assert [(s["name"], s["size"]) for s in detail["steps"]] == [
        ("fetch", len(json.dumps({"url": "secret-step-result-4d8e"}))),
        ("part:0", len(json.dumps("secret-step-result-4d8e"))),
    ]
    assert all(set(s) == {"name", "finished_at", "size", "code_version"} for s in detail["steps"])
    # And the code version each step and the job's last run ran under
    assert [s["code_version"] for s in detail["steps"]] == ["v1", "v2"]
    assert detail["code_version"] == "v2"
    waiting = detail["waiting_for"]
    assert (waiting["kind"], waiting["name"], waiting["until"]) == ("signal", "approve", None)
    assert [g["name"] for g in detail["signals"]] == ["note"]
    assert detail["resumes"] == 0  # waiting on its signal: suspended, not yet resumed
    assert detail["after"] == [
        {"id": str(pipeline.parent), "type": "extract", "status": "succeeded"}
    ]
    assert detail["children"] == [{"id": str(pipeline.child), "type": "embed", "status": "waiting"}]
    # And nothing of the user's data: no payload or result, no step result, no signal payload
    assert "payload" not in detail and "result" not in detail
    assert leaked(json.dumps(detail)) == []


def test_the_operator_sees_the_steps_and_graph_the_owner_sees(conn, app_login_url):
    pipeline = durable_pipeline(conn, ALICE)

    operator = OperatorConsole(conn).job(pipeline.job)
    with psycopg.connect(app_login_url, autocommit=True) as app:
        alice = PostgresStore(app, user_id=ALICE)
        durable = alice.steps.show(pipeline.job).to_dict()
        graph = family(alice.relatives(pipeline.job))

    assert {k: operator[k] for k in durable} == durable
    assert {k: operator[k] for k in graph} == graph


def test_the_shared_views_keep_an_application_user_to_their_own_jobs(conn, app_login_url):
    # Given Alice's durable job, and Bob on the application login
    pipeline = durable_pipeline(conn, ALICE)
    with psycopg.connect(app_login_url, autocommit=True) as app:
        bob = PostgresStore(app, user_id=BOB)

        # Then Bob's views of it find nothing: not the job, its steps or its graph
        with pytest.raises(JobNotFound):
            bob.steps.show(pipeline.job)
        assert bob.relatives(pipeline.job) == []
        assert bob.relatives(pipeline.parent) == []


@pytest.fixture
def plain_login_url(database_url: str):
    """A login in no tickq role: what PUBLIC may do."""
    name = f"tickq_nobody_{uuid4().hex[:8]}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(sql.SQL("create role {} login").format(sql.Identifier(name)))
        admin.execute(sql.SQL("grant usage on schema tickq to {}").format(sql.Identifier(name)))
    yield make_conninfo(database_url, user=name)
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", (name,)
        )
        admin.execute(sql.SQL("revoke usage on schema tickq from {}").format(sql.Identifier(name)))
        admin.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))


@pytest.mark.parametrize("function", OPERATOR_FUNCTIONS)
@pytest.mark.parametrize("login", ["app", "plain"])
def test_roles_other_than_the_operators_and_workers_may_not_call_the_operator_functions(
    conn, app_login_url, plain_login_url, function, login
):
    pipeline = durable_pipeline(conn, ALICE)
    url = app_login_url if login == "app" else plain_login_url
    statement = sql.SQL("select * from {}(%s)").format(sql.Identifier(*function.split(".")))

    with psycopg.connect(url, autocommit=True) as other:
        if login == "app":
            other.execute("select set_config('tickq.user_id', %s, false)", (str(ALICE),))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            other.execute(statement, (pipeline.job,))


def test_the_shared_views_are_not_publics(conn, plain_login_url):
    pipeline = durable_pipeline(conn, ALICE)
    with psycopg.connect(plain_login_url, autocommit=True) as nobody:
        for function in ("job_durable", "job_relatives"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                nobody.execute(
                    sql.SQL("select * from tickq.{}(%s)").format(sql.Identifier(function)),
                    (pipeline.job,),
                )


def test_an_unknown_or_malformed_id_is_refused(conn, operator_url):
    with psycopg.connect(operator_url, autocommit=True) as operator:
        console = OperatorConsole(operator)
        with pytest.raises(JobNotFound):
            console.job(uuid4())
        with pytest.raises(InvalidJob):
            console.job("not-a-uuid")
