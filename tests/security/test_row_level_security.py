"""Row-level security in plain SQL, logged in as real non-superuser roles.

Given jobs of two users (and one with no owner), an application role scoped to one user
sees, changes and creates only that user's rows, and changes them only through the
documented operations; the worker role sees every row but cannot alter the table's rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from uuid import UUID

import psycopg
import psycopg.errors
import pytest

from queue_core import InvalidParent, JobBatch
from queue_core.model import validation
from queue_core.postgres import PostgresStore
from tests.security.conftest import RoleConnect


@contextmanager
def scoped(conn: psycopg.Connection, user: UUID | str) -> Iterator[psycopg.Connection]:
    """One transaction in which the application acts for `user`."""
    with conn.transaction():
        conn.execute("select set_config('tickq.user_id', %s, true)", (str(user),))
        yield conn


def seed(conn: psycopg.Connection, user: UUID | None, *, key: str | None = None) -> UUID:
    spec = validation.job_spec("report", {"owner": str(user)}, user_id=user, idempotency_key=key)
    return PostgresStore(conn).enqueue(spec).id


def snapshot(conn: psycopg.Connection) -> list[tuple[object, ...]]:
    return conn.execute(
        "select id, user_id, status, attempts, lease_token, run_after, payload"
        " from tickq.jobs order by id"
    ).fetchall()


@pytest.fixture
def jobs(conn: psycopg.Connection, alice: UUID, bob: UUID) -> dict[str, UUID]:
    return {"alice": seed(conn, alice), "bob": seed(conn, bob), "nobody": seed(conn, None)}


def test_app_role_is_not_privileged(as_app: RoleConnect) -> None:
    row = (
        as_app()
        .execute("select rolsuper, rolbypassrls from pg_roles where rolname = current_user")
        .fetchone()
    )
    assert row == (False, False)


def test_app_sees_only_the_scoped_users_rows(
    as_app: RoleConnect, jobs: dict[str, UUID], alice: UUID
) -> None:
    with scoped(as_app(), alice) as c:
        seen = [r[0] for r in c.execute("select id from tickq.jobs").fetchall()]
    assert seen == [jobs["alice"]]


def test_app_without_a_user_sees_nothing(as_app: RoleConnect, jobs: dict[str, UUID]) -> None:
    assert as_app().execute("select count(*) from tickq.jobs").fetchone() == (0,)


def test_app_cannot_update_someone_elses_job(
    as_app: RoleConnect, conn: psycopg.Connection, jobs: dict[str, UUID], alice: UUID
) -> None:
    before = snapshot(conn)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(
            "update tickq.jobs set status = 'cancelled' where id = any(%s)",
            ([jobs["bob"], jobs["nobody"]],),
        )
    with pytest.raises(psycopg.errors.NoDataFound), scoped(as_app(), alice) as c:
        c.execute("select * from tickq.cancel(%s)", (jobs["bob"],))
    assert snapshot(conn) == before


def test_app_cannot_delete_jobs_not_even_its_own(
    as_app: RoleConnect, conn: psycopg.Connection, jobs: dict[str, UUID], alice: UUID
) -> None:
    before = snapshot(conn)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute("delete from tickq.jobs where id = %s", (jobs["alice"],))
    assert snapshot(conn) == before


@pytest.mark.parametrize("owner", ["bob", "nobody"])
def test_app_cannot_insert_a_job_for_someone_else(
    as_app: RoleConnect,
    conn: psycopg.Connection,
    jobs: dict[str, UUID],
    alice: UUID,
    bob: UUID,
    owner: str,
) -> None:
    before = snapshot(conn)
    user_id = bob if owner == "bob" else None
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute("insert into tickq.jobs (type, user_id) values ('report', %s)", (user_id,))
    assert snapshot(conn) == before


def test_app_cannot_give_its_own_job_to_someone_else(
    as_app: RoleConnect, conn: psycopg.Connection, jobs: dict[str, UUID], alice: UUID, bob: UUID
) -> None:
    before = snapshot(conn)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute("update tickq.jobs set user_id = %s where id = %s", (bob, jobs["alice"]))
    assert snapshot(conn) == before


@pytest.mark.parametrize(
    "assignment",
    [
        "status = 'succeeded'",
        "status = 'running'",
        "status = 'dead'",
        "attempts = 2",
        "lease_token = gen_random_uuid()",
        "lease_until = now() + interval '1 hour'",
        "payload = '{\"evil\": true}'",
        "max_attempts = 1000",
        "result = '{}'",
        "run_after = now() - interval '1 day'",
    ],
)
def test_app_cannot_change_engine_fields_of_its_own_job(
    as_app: RoleConnect,
    conn: psycopg.Connection,
    jobs: dict[str, UUID],
    alice: UUID,
    assignment: str,
) -> None:
    before = snapshot(conn)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(f"update tickq.jobs set {assignment} where id = %s", (jobs["alice"],))
    assert snapshot(conn) == before


def test_app_cannot_insert_engine_fields(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    for column, value in [("status", "succeeded"), ("attempts", 3), ("lease_token", None)]:
        with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
            c.execute(
                f"insert into tickq.jobs (type, user_id, {column}) values ('r', %s, %s)",
                (alice, value),
            )
    assert snapshot(conn) == []


def test_app_cannot_take_the_worker_role_or_lift_security(
    as_app: RoleConnect, conn: psycopg.Connection, jobs: dict[str, UUID]
) -> None:
    c = as_app()
    for statement in (
        "set role tickq_worker",
        "alter table tickq.jobs disable row level security",
        "drop policy jobs_owner on tickq.jobs",
        "alter table tickq.jobs disable trigger jobs_app_guard",
        "select * from tickq.schema_migrations",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute(statement)
    row = conn.execute("select relrowsecurity from pg_class where oid = 'tickq.jobs'::regclass")
    assert row.fetchone() == (True,)
    assert len(snapshot(conn)) == 3


def test_app_cancels_and_retries_its_own_jobs_through_the_store(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    job_id = seed(conn, alice)
    store = PostgresStore(as_app(), user_id=alice)

    cancelled = store.cancel(job_id)
    retried = store.retry(job_id)

    assert (cancelled.status, retried.status, retried.attempts) == ("cancelled", "queued", 0)


def test_app_enqueues_for_its_user_and_keys_are_private_per_user(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    first = PostgresStore(as_app(), user_id=alice).enqueue(
        validation.job_spec("report", user_id=alice, idempotency_key="k")
    )
    other = PostgresStore(as_app(), user_id=bob).enqueue(
        validation.job_spec("report", user_id=bob, idempotency_key="k")
    )

    assert not first.duplicate and not other.duplicate and first.id != other.id
    owners = conn.execute("select user_id from tickq.jobs order by user_id").fetchall()
    assert sorted(r[0] for r in owners) == sorted([alice, bob])


def test_worker_sees_all_rows_but_cannot_change_the_rules(
    as_worker: RoleConnect, conn: psycopg.Connection, jobs: dict[str, UUID]
) -> None:
    c = as_worker()
    seen = {r[0] for r in c.execute("select id from tickq.jobs").fetchall()}
    assert seen == set(jobs.values())
    for statement in (
        "alter table tickq.jobs disable row level security",
        "drop policy jobs_owner on tickq.jobs",
        "alter table tickq.jobs disable trigger jobs_app_guard",
        "create role intruder superuser",
        "set role tickq_app",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute(statement)


def test_worker_runs_the_whole_job_lifecycle(
    as_worker: RoleConnect, conn: psycopg.Connection, jobs: dict[str, UUID]
) -> None:
    store = PostgresStore(as_worker())
    claimed = store.claim(limit=10)
    for job in claimed:
        store.complete(job, {"done": True})
    assert {j.id for j in claimed} == set(jobs.values())
    statuses = conn.execute("select distinct status from tickq.jobs").fetchall()
    assert statuses == [("succeeded",)]


def test_app_enqueues_after_its_own_jobs_and_never_after_someone_elses(
    as_app: RoleConnect, conn: psycopg.Connection, jobs: dict[str, UUID], alice: UUID
) -> None:
    store = PostgresStore(as_app(), user_id=alice)
    spec = validation.job_spec("report", user_id=alice)
    batch = JobBatch.of([spec])

    (child,) = store.enqueue_after(batch, [(jobs["alice"],)])
    with pytest.raises(InvalidParent, match="not found"):
        store.enqueue_after(batch, [(jobs["bob"],)])
    with pytest.raises(InvalidParent, match="not found"):
        store.enqueue_after(batch, [(jobs["nobody"],)])

    assert child.status == "waiting"
    edges = conn.execute("select child_id, parent_id, user_id from tickq.job_dependencies")
    assert edges.fetchall() == [(child.id, jobs["alice"], alice)]
    flagged = conn.execute("select id from tickq.jobs where has_children").fetchall()
    assert flagged == [(jobs["alice"],)]


def test_app_sees_and_writes_only_its_own_edges(
    as_app: RoleConnect, conn: psycopg.Connection, jobs: dict[str, UUID], alice: UUID, bob: UUID
) -> None:
    parent = seed(conn, bob)
    PostgresStore(conn).enqueue_after(
        JobBatch.of([validation.job_spec("report", user_id=bob)]), [(parent,)]
    )
    with scoped(as_app(), alice) as c:
        assert c.execute("select count(*) from tickq.job_dependencies").fetchone() == (0,)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(
            "insert into tickq.job_dependencies (child_id, parent_id, user_id) values (%s, %s, %s)",
            (jobs["alice"], jobs["bob"], bob),
        )
    assert conn.execute("select count(*) from tickq.job_dependencies").fetchone() == (1,)


@pytest.mark.parametrize("status", ["running", "succeeded", "dead"])
def test_app_inserts_only_queued_or_waiting_jobs(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, status: str
) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(
            "insert into tickq.jobs (type, user_id, status) values ('r', %s, %s)", (alice, status)
        )
    assert snapshot(conn) == []


def test_app_marks_a_parent_only_without_changing_anything_else(
    as_app: RoleConnect, conn: psycopg.Connection, jobs: dict[str, UUID], alice: UUID
) -> None:
    before = snapshot(conn)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(
            "update tickq.jobs set has_children = true, error = 'x' where id = %s",
            (jobs["alice"],),
        )
    assert snapshot(conn) == before


def test_every_table_under_row_level_security_binds_its_owner_too(conn: psycopg.Connection) -> None:
    # Given the migrated schema, When its tables are listed, Then no table that keeps rows
    # per user lets its owner (often the one login of a small deployment) past the policies
    loose = conn.execute(
        "select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace"
        " where n.nspname = 'tickq' and c.relkind in ('r', 'p')"
        " and c.relrowsecurity and not c.relforcerowsecurity order by 1"
    ).fetchall()
    assert loose == []
