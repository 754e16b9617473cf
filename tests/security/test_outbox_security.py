"""The outbox under row-level security, as a real application role: a user publishes and
reads only its own events, cannot write tickq's lifecycle events or another owner's, and
cannot mark, edit or delete any event (so it can neither hide one nor make one resend)."""

from __future__ import annotations

from uuid import UUID

import psycopg
import psycopg.errors
import pytest

from queue_core import InvalidJob, publish
from tests.security.conftest import RoleConnect
from tests.security.test_row_level_security import scoped


def events(conn: psycopg.Connection) -> list[tuple[object, ...]]:
    return conn.execute(
        "select user_id, source, detail_type, published_at from tickq.outbox order by id"
    ).fetchall()


def test_an_app_user_publishes_its_own_events_and_reads_no_one_elses(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    c = as_app()
    with scoped(c, alice):
        publish(c, "Invoice Paid", {"n": 1})
    with scoped(c, bob):
        publish(c, "Invoice Paid", {"n": 2})
    conn.execute(
        "insert into tickq.outbox (job_id, user_id, detail_type, detail)"
        " values (gen_random_uuid(), %s, 'Job Dead', '{}')",
        (bob,),
    )

    with scoped(c, alice):
        seen = c.execute("select user_id, detail from tickq.outbox").fetchall()
    unscoped = c.execute("select count(*) from tickq.outbox").fetchone()

    assert seen == [(alice, {"n": 1})]
    assert unscoped == (0,)
    assert [(u, t) for u, _, t, _ in events(conn)] == [
        (alice, "Invoice Paid"),
        (bob, "Invoice Paid"),
        (bob, "Job Dead"),
    ]


@pytest.mark.parametrize(
    "statement",
    [
        # another owner's event
        "insert into tickq.outbox (user_id, source, detail_type, detail)"
        " values ('{bob}', 'app', 'Invoice Paid', '{{}}')",
        # tickq's own source: a forged lifecycle event
        "insert into tickq.outbox (user_id, source, detail_type, detail)"
        " values ('{alice}', 'tickq', 'Job Dead', '{{}}')",
        "insert into tickq.outbox (user_id, detail_type, detail)"
        " values ('{alice}', 'Job Dead', '{{}}')",
        # an event of a job, or one already published
        "insert into tickq.outbox (user_id, source, detail_type, detail, job_id)"
        " values ('{alice}', 'app', 'Job Dead', '{{}}', gen_random_uuid())",
        "insert into tickq.outbox (user_id, source, detail_type, detail, published_at)"
        " values ('{alice}', 'app', 'Paid', '{{}}', now())",
        # marking, editing, deleting
        "update tickq.outbox set published_at = now()",
        "update tickq.outbox set detail = '{{\"forged\": true}}'",
        "delete from tickq.outbox",
        "truncate tickq.outbox",
    ],
)
def test_an_app_user_cannot_forge_hide_or_resend_events(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID, statement: str
) -> None:
    c = as_app()
    with scoped(c, alice):
        publish(c, "Invoice Paid", {"n": 1})
    before = events(conn)

    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(c, alice):
        c.execute(statement.format(alice=alice, bob=bob))

    assert events(conn) == before


def test_publish_under_tickqs_source_is_refused_before_the_database(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    c = as_app()
    with pytest.raises(InvalidJob, match="source"), scoped(c, alice):
        publish(c, "Job Dead", {"id": "x"}, source="tickq")
    assert events(conn) == []


def test_a_death_in_an_app_users_transaction_still_writes_its_event(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    # The trigger's insert is the schema owner's: whoever's statement makes a job dead (here
    # the owner's own login standing in for any path), the event is written and stays
    # tickq's.
    job = conn.execute(
        "insert into tickq.jobs (type, user_id) values ('t', %s) returning id", (alice,)
    ).fetchone()
    assert job is not None
    conn.execute("update tickq.jobs set status = 'dead' where id = %s", (job[0],))
    c = as_app()
    with scoped(c, alice):
        mine = c.execute("select source, detail_type, job_id from tickq.outbox").fetchall()
    assert mine == [("tickq", "Job Dead", job[0])]
