"""The key table under row-level security, logged in as real non-superuser roles: an
application user reads and claims only its own idempotency keys, so it cannot learn whether
another user's key exists, and cannot free or move a key by hand."""

from __future__ import annotations

from uuid import UUID

import psycopg
import psycopg.errors
import pytest

from queue_core.model import validation
from queue_core.postgres import PostgresStore
from tests.security.conftest import RoleConnect
from tests.security.test_row_level_security import scoped, seed


def test_app_reads_only_its_own_key_rows(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    mine = seed(conn, alice, key="shared")
    seed(conn, bob, key="shared")
    seed(conn, bob, key="bob-only")
    seed(conn, None, key="nobody")

    with scoped(as_app(), alice) as c:
        rows = c.execute("select idempotency_key, user_id, job_id from tickq.job_keys").fetchall()
        probe = c.execute(
            "select count(*) from tickq.job_keys where idempotency_key = 'bob-only'"
        ).fetchone()
    unscoped = as_app().execute("select count(*) from tickq.job_keys").fetchone()

    assert rows == [("shared", alice, mine)]
    assert probe == (0,)
    assert unscoped == (0,)
    assert conn.execute("select count(*) from tickq.job_keys").fetchone() == (4,)


def test_app_cannot_claim_a_key_for_another_user_nor_free_one(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    held = seed(conn, bob, key="k")
    c = as_app()
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(c, alice):
        c.execute(
            "insert into tickq.job_keys (idempotency_key, user_id, job_id)"
            " values ('k2', %s, gen_random_uuid())",
            (bob,),
        )
    for statement in (
        "delete from tickq.job_keys",
        "update tickq.job_keys set job_id = gen_random_uuid()",
        "truncate tickq.job_keys",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(c, bob):
            c.execute(statement)

    rows = conn.execute("select idempotency_key, user_id, job_id from tickq.job_keys").fetchall()
    assert rows == [("k", bob, held)]


def test_an_app_user_enqueueing_another_users_key_gets_a_job_of_its_own(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    """A conflict would tell Alice that Bob holds the key: keys are scoped to their owner."""
    bobs = seed(conn, bob, key="k")
    store = PostgresStore(as_app(), user_id=alice)
    batch = store.enqueue_many([validation.job_spec("report", user_id=alice, idempotency_key="k")])
    again = store.enqueue(validation.job_spec("report", user_id=alice, idempotency_key="k"))

    assert not batch[0].duplicate and batch[0].id != bobs
    assert again.duplicate and again.id == batch[0].id


def test_the_key_table_binds_its_owner_too(conn: psycopg.Connection) -> None:
    row = conn.execute(
        "select relrowsecurity, relforcerowsecurity from pg_class"
        " where oid = 'tickq.job_keys'::regclass"
    ).fetchone()
    assert row == (True, True)
