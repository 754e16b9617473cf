"""The gate surface of the application login: tickq.job_gate takes an owner and a clock, so
the application role may not execute it; its gated enqueues go through tickq.enqueue_many,
which takes both from the session and the database and refuses without a user; a gate row
goes with a job of its own owner, whoever writes it.
Each attack here succeeded before: another owner's debounced payload rewritten by a login
that named no user, a -infinity clock stored, gate rows left without jobs or planted on
another owner's job."""

from __future__ import annotations

from uuid import UUID, uuid4

import psycopg
import psycopg.errors
import pytest

from queue_core.model.validation import job_spec
from queue_core.postgres import PostgresStore
from tests.security.conftest import RoleConnect
from tests.security.test_row_level_security import scoped

GATE = (
    "select job_id, outcome from tickq.job_gate("
    "'debounce', %s, %s, 60, null, %s::jsonb, %s::timestamptz, %s)"
)
# The application's gated enqueue: tickq.enqueue_many, which takes the owner and the clock
# from the session and the database.
APP_GATE = (
    "select * from tickq.enqueue_many(jsonb_build_array(jsonb_build_object("
    "'type', 'report', 'debounce', jsonb_build_object('key', %s::text, 'seconds', 60))))"
)


def debounced_job(conn: psycopg.Connection, owner: UUID, key: str = "k") -> UUID:
    spec = job_spec("report", {"v": 1}, user_id=owner, debounce={"key": key, "seconds": 60})
    return PostgresStore(conn).enqueue(spec).id


def gate_rows(conn: psycopg.Connection) -> list[tuple[object, ...]]:
    return conn.execute(
        "select job_id, user_id, gate_key, enqueues from tickq.job_gates order by job_id"
    ).fetchall()


def payload(conn: psycopg.Connection, job_id: UUID) -> object:
    return conn.execute("select payload from tickq.jobs where id = %s", (job_id,)).fetchone()


def test_the_application_may_not_name_another_owner_to_the_gate(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    victim = debounced_job(conn, alice)
    before = gate_rows(conn)

    with as_app() as app, pytest.raises(psycopg.errors.InsufficientPrivilege):
        app.execute(GATE, ("k", alice, '{"evil": true}', None, uuid4()))

    assert payload(conn, victim) == ({"v": 1},)
    assert gate_rows(conn) == before


@pytest.mark.parametrize("clock", ["-infinity", "infinity", "4000-01-01 00:00:00+00 BC"])
def test_the_application_may_not_pass_a_clock(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, clock: str
) -> None:
    with (
        as_app() as app,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
        scoped(app, alice),
    ):
        app.execute(GATE, ("k", alice, "{}", clock, uuid4()))
    assert gate_rows(conn) == []


@pytest.mark.parametrize("clock", ["-infinity", "infinity", "4000-01-01 00:00:00+00 BC"])
def test_a_worker_clock_the_engine_cannot_read_is_refused(
    as_worker: RoleConnect, conn: psycopg.Connection, clock: str
) -> None:
    with as_worker() as worker, pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
        worker.execute(GATE, ("k", None, "{}", clock, uuid4()))
    assert refused.value.diag.column_name == "now"
    assert gate_rows(conn) == []


def test_the_application_gate_refuses_without_a_user(
    as_app: RoleConnect, conn: psycopg.Connection
) -> None:
    with as_app() as app, pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
        app.execute(APP_GATE, ("k",))
    assert "needs the transaction's user" in str(refused.value)
    assert gate_rows(conn) == []
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (0,)


def test_a_gate_row_without_its_job_is_refused_at_commit(
    conn: psycopg.Connection, alice: UUID
) -> None:
    # Only a worker (or the owner) may call the gate itself; even it cannot leave a row.
    with pytest.raises(psycopg.errors.ForeignKeyViolation), conn.transaction():
        ((_, outcome),) = conn.execute(GATE, ("orphan", alice, "{}", None, uuid4())).fetchall()
        assert outcome == "created"
        # ...and no job is inserted: the commit is refused.
    assert gate_rows(conn) == []


def test_a_gate_row_cannot_be_planted_on_another_owners_job(
    conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    victim = PostgresStore(conn).enqueue(job_spec("report", {}, user_id=bob)).id
    with pytest.raises(psycopg.errors.ForeignKeyViolation), conn.transaction():
        conn.execute(GATE, ("planted", alice, "{}", None, victim))
    assert gate_rows(conn) == []


def test_an_applications_own_gated_enqueues_still_debounce(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    with as_app() as app:
        store = PostgresStore(app, user_id=alice)
        spec = job_spec("report", {"v": 1}, user_id=alice, debounce={"key": "k", "seconds": 60})
        first = store.enqueue(spec)
        again = store.enqueue(
            job_spec("report", {"v": 2}, user_id=alice, debounce={"key": "k", "seconds": 60})
        )
        with scoped(app, alice):
            sql = app.execute(
                "select tickq.enqueue('report', '{\"v\": 3}', debounce_key => 'k',"
                " debounce_seconds => 60)"
            ).fetchone()

    assert again.debounced and again.id == first.id
    assert sql == (first.id,)
    assert payload(conn, first.id) == ({"v": 3},)
    assert [(row[0], row[1], row[3]) for row in gate_rows(conn)] == [(first.id, alice, 3)]
