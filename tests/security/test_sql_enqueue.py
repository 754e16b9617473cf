"""tickq.enqueue, the SQL enqueue, logged in as real non-superuser roles: an application's
job belongs to the transaction's user and passes the same checks and limits as the API's;
a worker's is trusted; a held key answers with its holder; and a trigger on the
application's own table enqueues in the same transaction, rolled back with it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import psycopg
import psycopg.errors
import pytest

from queue_core import PostgresStore
from queue_core.model.validation import job_spec
from queue_core.policies.limits import Limits, queue_limit
from tests.security.conftest import RoleConnect
from tests.security.test_row_level_security import scoped


def enqueue(conn: psycopg.Connection, *args: Any, **named: Any) -> UUID:
    """Call tickq.enqueue with positional and named arguments, as SQL callers do."""
    values = [psycopg.sql.Literal(a) for a in args]
    values += [
        psycopg.sql.SQL("{} => {}").format(psycopg.sql.Identifier(k), psycopg.sql.Literal(v))
        for k, v in named.items()
    ]
    query = psycopg.sql.SQL("select tickq.enqueue({})").format(psycopg.sql.SQL(", ").join(values))
    row = conn.execute(query).fetchone()
    assert row is not None
    return UUID(str(row[0]))


def count(conn: psycopg.Connection) -> int:
    row = conn.execute("select count(*) from tickq.jobs").fetchone()
    assert row is not None
    return int(row[0])


def test_an_applications_job_belongs_to_the_transactions_user(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    with scoped(as_app(), alice) as c:
        job = enqueue(
            c,
            "embed",
            psycopg.types.json.Jsonb({"doc": 1}),
            priority=5,
            max_attempts=7,
            group_key="docs",
        )
    row = conn.execute(
        "select user_id, queue, type, payload, priority, owner_priority, max_attempts,"
        " group_key, status from tickq.jobs where id = %s",
        (job,),
    ).fetchone()
    # An application user's priority orders only its own jobs: its global level is 0.
    assert row == (alice, "default", "embed", {"doc": 1}, 0, 5, 7, f"{alice}/docs", "queued")
    with scoped(as_app(), alice) as c:
        plain = enqueue(c, "embed")
    assert conn.execute("select group_key from tickq.jobs where id = %s", (plain,)).fetchone() == (
        str(alice),
    )


def test_row_level_security_hides_other_users_jobs_and_keys(
    as_app: RoleConnect, alice: UUID, bob: UUID
) -> None:
    with scoped(as_app(), alice) as c:
        alices = enqueue(c, "t", idempotency_key="same")
    with scoped(as_app(), bob) as c:
        bobs = enqueue(c, "t", idempotency_key="same")  # another owner's key: a new job
        assert bobs != alices
        assert c.execute("select id from tickq.jobs").fetchall() == [(bobs,)]
        assert c.execute("select job_id from tickq.job_keys").fetchall() == [(bobs,)]


def test_a_duplicate_key_returns_the_holder(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    with scoped(as_app(), alice) as c:
        first = enqueue(c, "t", idempotency_key="k")
        assert enqueue(c, "t", idempotency_key="k") == first
    held = PostgresStore(conn, user_id=alice).enqueue(
        job_spec("t", user_id=alice, idempotency_key="k")
    )
    assert held.duplicate and held.id == first
    # The database itself refuses a second live job of the key, to every role that may
    # insert (the owner's login here); the application may not insert at all.
    with pytest.raises(psycopg.errors.UniqueViolation), conn.transaction():
        conn.execute(
            "insert into tickq.jobs (type, user_id, idempotency_key, group_key)"
            " values ('t', %s, 'k', %s)",
            (alice, str(alice)),
        )
    with scoped(as_app(), alice) as c, pytest.raises(psycopg.errors.InsufficientPrivilege):
        c.execute(
            "insert into tickq.jobs (type, user_id, idempotency_key, group_key)"
            " values ('t', %s, 'k2', %s)",
            (alice, str(alice)),
        )
    assert count(conn) == 1


def test_an_application_without_a_user_is_refused(
    as_app: RoleConnect, conn: psycopg.Connection
) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="transaction's user"):
        enqueue(as_app(), "t")
    assert count(conn) == 0


BAD = [
    ({"type": ""}, "type"),
    ({"type": "has space"}, "type"),
    ({"type": "x" * 129}, "type"),
    ({"type": "-leading"}, "type"),
    ({"type": "t", "queue": "bad queue"}, "queue"),
    ({"type": "t", "group_key": "a b"}, "group_key"),
    ({"type": "t", "group_key": "g" * 100}, "group_key"),  # too long with the owner's prefix
    ({"type": "t", "payload": psycopg.types.json.Jsonb([1, 2])}, "payload"),
    ({"type": "t", "payload": psycopg.types.json.Jsonb({"big": "x" * 262_144})}, "payload"),
    ({"type": "t", "idempotency_key": ""}, "idempotency_key"),
    ({"type": "t", "idempotency_key": "k" * 256}, "idempotency_key"),
    ({"type": "t", "max_attempts": 0}, "max_attempts"),
    ({"type": "t", "max_attempts": 1001}, "max_attempts"),
    ({"type": "t", "run_after": "infinity"}, "run_after"),
]


@pytest.mark.parametrize(("args", "field"), BAD, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD)])
def test_bad_input_is_refused_naming_the_parameter_and_writes_nothing(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, args: dict[str, Any], field: str
) -> None:
    with (
        pytest.raises(psycopg.errors.InvalidParameterValue, match=field) as refused,
        scoped(as_app(), alice) as c,
    ):
        enqueue(c, **args)
    assert refused.value.diag.column_name == field
    assert count(conn) == 0
    assert conn.execute("select count(*) from tickq.job_keys").fetchone() == (0,)


def test_a_full_queue_refuses_with_its_own_sqlstate_and_writes_nothing(
    as_app: RoleConnect, as_worker: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    Limits(conn).set_queue(queue_limit("bulk", max_depth=2))
    with scoped(as_app(), alice) as c:
        enqueue(c, "t", queue="bulk")
        enqueue(c, "t", queue="bulk")
    for caller in (as_app(), as_worker()):
        with pytest.raises(psycopg.Error) as refused, scoped_or_not(caller, alice):
            enqueue(caller, "t", queue="bulk", idempotency_key="new")
        assert refused.value.diag.sqlstate == "TQ429"
    assert count(conn) == 2
    assert conn.execute("select count(*) from tickq.job_keys").fetchone() == (0,)


def scoped_or_not(conn: psycopg.Connection, user: UUID) -> Any:
    """The application's transaction for `user`; a worker's enqueue names no user."""
    info = conn.execute("select pg_has_role('tickq_worker', 'USAGE')").fetchone()
    return conn.transaction() if info and info[0] else scoped(conn, user)


def test_a_past_run_after_becomes_now_for_an_application_but_not_a_worker(
    as_app: RoleConnect, as_worker: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    past = datetime(2020, 1, 1, tzinfo=UTC)
    with scoped(as_app(), alice) as c:
        app_job = enqueue(c, "t", run_after=past)
    worker_job = enqueue(as_worker(), "t", run_after=past)
    runs = dict(conn.execute("select id, run_after from tickq.jobs").fetchall())
    assert runs[worker_job] == past
    assert runs[app_job] > datetime.now(UTC) - timedelta(minutes=5)


def test_a_workers_job_is_trusted_and_has_no_owner(
    as_worker: RoleConnect, conn: psycopg.Connection
) -> None:
    worker = as_worker()
    job = enqueue(worker, "t", queue="q1", group_key="shared", priority=-3, idempotency_key="w")
    assert enqueue(worker, "t", idempotency_key="w") == job
    row = conn.execute(
        "select user_id, queue, group_key, priority, max_attempts from tickq.jobs"
    ).fetchone()
    assert row == (None, "q1", "shared", -3, 3)
    default = enqueue(worker, "t")
    assert conn.execute(
        "select group_key from tickq.jobs where id = %s", (default,)
    ).fetchone() == ("",)


@pytest.fixture
def documents(conn: psycopg.Connection) -> Iterator[str]:
    """The application's own table, whose inserts enqueue their embedding job (the README's
    example, "Enqueue from SQL")."""
    table = f"documents_{uuid4().hex[:8]}"
    conn.execute(
        psycopg.sql.SQL(
            """
            create table public.{t} (
                id uuid primary key default gen_random_uuid(),
                user_id uuid not null default tickq.current_user_id(),
                body text not null
            );
            create function public.{f}() returns trigger language plpgsql as $$
            begin
                perform tickq.enqueue('embed', jsonb_build_object('document_id', new.id),
                                      idempotency_key => 'embed:' || new.id);
                return new;
            end $$;
            create trigger enqueue_embedding after insert on public.{t}
                for each row execute function public.{f}();
            grant select, insert on public.{t} to tickq_app;
            """
        ).format(t=psycopg.sql.Identifier(table), f=psycopg.sql.Identifier(f"{table}_embed"))
    )
    yield table
    conn.execute(psycopg.sql.SQL("drop table public.{}").format(psycopg.sql.Identifier(table)))
    conn.execute(
        psycopg.sql.SQL("drop function public.{}()").format(
            psycopg.sql.Identifier(f"{table}_embed")
        )
    )


def test_a_trigger_enqueues_in_the_same_transaction_and_rolls_back_with_it(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, documents: str
) -> None:
    insert = psycopg.sql.SQL("insert into public.{} (body) values ('hello') returning id").format(
        psycopg.sql.Identifier(documents)
    )
    app = as_app()
    with scoped(app, alice) as c:
        row = c.execute(insert).fetchone()
        assert row is not None
        doc = row[0]
        assert count(c) == 1  # the job is visible inside the transaction
    jobs = conn.execute("select user_id, type, payload, idempotency_key from tickq.jobs").fetchall()
    assert jobs == [(alice, "embed", {"document_id": str(doc)}, f"embed:{doc}")]

    class Abandon(Exception):
        pass

    with pytest.raises(Abandon), scoped(app, alice) as c:
        c.execute(insert)
        raise Abandon
    assert count(conn) == 1
    rows = conn.execute(
        psycopg.sql.SQL("select count(*) from public.{}").format(psycopg.sql.Identifier(documents))
    ).fetchone()
    assert rows == (1,)
