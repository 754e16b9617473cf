"""Row-level security, proven with real non-superuser login roles.

Roles are cluster-wide, so each test creates its own with random names and drops them after.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from uuid import UUID, uuid4

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from queue_core import InvalidTransition, JobNotFound, PostgresStore, Status, TickqError
from queue_core.model.validation import job_spec

Login = Callable[[str], psycopg.Connection]
ALICE = UUID("0190c0de-0000-7000-8000-00000000a11c")
BOB = UUID("0190c0de-0000-7000-8000-000000000b0b")


@pytest.fixture
def login(conn: psycopg.Connection, database_url: str) -> Iterator[Login]:
    """Open connections as a fresh LOGIN role that is a member of the given tickq role."""
    created: list[str] = []
    opened: list[psycopg.Connection] = []

    def open_as(member_of: str) -> psycopg.Connection:
        name = f"tickq_test_{member_of.removeprefix('tickq_')}_{secrets.token_hex(6)}"
        password = secrets.token_hex(16)
        conn.execute(
            sql.SQL("create role {} login nosuperuser nobypassrls password {} in role {}").format(
                sql.Identifier(name), sql.Literal(password), sql.Identifier(member_of)
            )
        )
        created.append(name)
        connection = psycopg.connect(
            make_conninfo(database_url, user=name, password=password), autocommit=True
        )
        opened.append(connection)
        return connection

    yield open_as
    for connection in opened:
        connection.close()
    for name in created:
        conn.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))


@pytest.fixture
def bobs_job(conn: psycopg.Connection) -> UUID:
    """A job owned by Bob, written by the (superuser) test connection."""
    return PostgresStore(conn).enqueue(job_spec("embed", {"secret": "bob's"}, user_id=BOB)).id


def count_jobs(conn: psycopg.Connection) -> int:
    row = conn.execute("select count(*) from tickq.jobs").fetchone()
    assert row is not None
    return int(row[0])


def test_the_application_role_is_really_unprivileged(login: Login) -> None:
    app = login("tickq_app")

    row = app.execute(
        "select rolsuper, rolbypassrls from pg_roles where rolname = current_user"
    ).fetchone()

    assert row == (False, False)


def test_a_user_enqueues_and_reads_their_own_jobs(login: Login) -> None:
    alice = PostgresStore(login("tickq_app"), user_id=ALICE)

    result = alice.enqueue(job_spec("embed", {"doc": 1}, user_id=ALICE, idempotency_key="k"))
    again = alice.enqueue(job_spec("embed", {"doc": 1}, user_id=ALICE, idempotency_key="k"))

    assert alice.get(result.id).payload == {"doc": 1}
    assert [j.id for j in alice.list_jobs().jobs] == [result.id]
    assert (again.duplicate, again.id) == (True, result.id)


def test_a_user_never_sees_another_users_job(login: Login, bobs_job: UUID) -> None:
    alice = PostgresStore(login("tickq_app"), user_id=ALICE)

    with pytest.raises(JobNotFound):
        alice.get(bobs_job)
    assert alice.list_jobs().jobs == []
    assert alice.list_jobs(user_id=BOB).jobs == []
    assert alice.stats() == []


def test_a_user_cannot_cancel_another_users_job(
    login: Login, bobs_job: UUID, conn: psycopg.Connection
) -> None:
    alice = PostgresStore(login("tickq_app"), user_id=ALICE)

    with pytest.raises(JobNotFound):
        alice.cancel(bobs_job)

    assert PostgresStore(conn).get(bobs_job).status == Status.QUEUED


def test_a_user_cannot_retry_another_users_dead_job(login: Login, conn: psycopg.Connection) -> None:
    worker = PostgresStore(conn)
    dead = worker.enqueue(job_spec("embed", user_id=BOB, max_attempts=1)).id
    (job,) = worker.claim()
    worker.fail(job, "boom")
    alice = PostgresStore(login("tickq_app"), user_id=ALICE)

    with pytest.raises(JobNotFound):
        alice.retry(dead)
    # Retrying in bulk is the operators' (tickq.jobs_retry is no function of the application
    # login's).
    with pytest.raises(TickqError, match="permission denied"):
        alice.retry_dead()

    assert worker.get(dead).status == Status.DEAD


def test_a_user_cannot_enqueue_a_job_owned_by_someone_else(
    login: Login, conn: psycopg.Connection
) -> None:
    alice = PostgresStore(login("tickq_app"), user_id=ALICE)

    with pytest.raises(TickqError, match=r"permission denied|row-level security"):
        alice.enqueue(job_spec("embed", user_id=BOB))
    with pytest.raises(TickqError):
        alice.enqueue(job_spec("embed"))

    assert count_jobs(conn) == 0


def test_the_application_role_without_a_user_sees_nothing(login: Login, bobs_job: UUID) -> None:
    anonymous = PostgresStore(login("tickq_app"))

    with pytest.raises(JobNotFound):
        anonymous.get(bobs_job)
    assert anonymous.list_jobs().jobs == []


def run_as(connection: psycopg.Connection, user: UUID, statement: str, job: UUID) -> None:
    """Run one statement in a transaction scoped to `user`, as the application would."""
    with connection.transaction():
        connection.execute("select set_config('tickq.user_id', %s, true)", (str(user),))
        connection.execute(statement, {"id": job})


@pytest.mark.parametrize(
    "statement",
    [
        "update tickq.jobs set status = 'succeeded' where id = %(id)s",
        "update tickq.jobs set status = 'running' where id = %(id)s",
        "update tickq.jobs set attempts = attempts + 1 where id = %(id)s",
        "update tickq.jobs set lease_token = gen_random_uuid() where id = %(id)s",
        "update tickq.jobs set payload = '{}' where id = %(id)s",
        "update tickq.jobs set user_id = gen_random_uuid() where id = %(id)s",
        "delete from tickq.jobs where id = %(id)s",
    ],
)
def test_a_user_cannot_change_their_own_job_directly_in_sql(
    login: Login, conn: psycopg.Connection, statement: str
) -> None:
    app = login("tickq_app")
    job = PostgresStore(app, user_id=ALICE).enqueue(job_spec("embed", user_id=ALICE)).id
    before = PostgresStore(conn).get(job)

    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        run_as(app, ALICE, statement, job)

    assert PostgresStore(conn).get(job) == before


def test_a_user_can_cancel_and_retry_their_own_job_through_the_store(login: Login) -> None:
    alice = PostgresStore(login("tickq_app"), user_id=ALICE)
    job = alice.enqueue(job_spec("embed", user_id=ALICE)).id

    cancelled = alice.cancel(job)
    retried = alice.retry(job)

    assert cancelled.status == Status.CANCELLED
    assert (retried.status, retried.attempts) == (Status.QUEUED, 0)
    with pytest.raises(InvalidTransition):
        alice.retry(job)


def test_the_worker_role_sees_and_runs_every_users_jobs(
    login: Login, conn: psycopg.Connection
) -> None:
    owners = [ALICE, BOB, uuid4(), None]
    for owner in owners:
        PostgresStore(conn).enqueue(job_spec("embed", user_id=owner))
    worker = PostgresStore(login("tickq_worker"))

    listed = worker.list_jobs().jobs
    claimed = worker.claim(limit=10)
    for job in claimed:
        worker.complete(job, {"by": "worker"})

    assert {j.user_id for j in listed} == set(owners)
    assert len(claimed) == len(owners)
    assert {j.status for j in worker.list_jobs().jobs} == {Status.SUCCEEDED}


def test_the_application_role_cannot_claim_jobs(login: Login, conn: psycopg.Connection) -> None:
    app = login("tickq_app")
    alice = PostgresStore(app, user_id=ALICE)
    job = alice.enqueue(job_spec("embed", user_id=ALICE)).id

    with pytest.raises(TickqError):
        alice.claim()

    assert PostgresStore(conn).get(job).status == Status.QUEUED
