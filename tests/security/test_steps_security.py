"""Durable steps under row-level security, as real non-superuser roles: an application sees
the steps and signals of its own jobs only, signals only its own jobs, and cannot use the
columns of durable steps to move a job or forge progress; a worker sees and writes all."""

from __future__ import annotations

from uuid import UUID

import psycopg
import psycopg.errors
import pytest

from queue_core import LeaseLost, StepStore
from queue_core.errors import JobNotFound
from queue_core.model import validation
from queue_core.model.steps import FOREVER, WaitKind
from queue_core.postgres import PostgresStore
from tests.security.conftest import RoleConnect
from tests.security.test_row_level_security import scoped


def job_with_a_step(conn: psycopg.Connection, user: UUID, *, waiting: bool = True) -> UUID:
    """A job of `user` with one stored step, suspended waiting for the signal "go"."""
    store = PostgresStore(conn)
    job_id = store.enqueue(validation.job_spec("report", {}, user_id=user)).id
    (claimed,) = [j for j in store.claim(limit=10) if j.id == job_id]
    assert claimed.lease_token is not None
    StepStore(store).complete(job_id, claimed.lease_token, "fetch", '"secret of ' + str(user) + '"')
    if waiting:
        StepStore(store).suspend(
            job_id, claimed.lease_token, kind=WaitKind.SIGNAL, name="go", until=FOREVER
        )
    return job_id


def test_app_sees_only_its_own_jobs_steps_and_signals(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    mine, theirs = job_with_a_step(conn, alice), job_with_a_step(conn, bob)
    StepStore(PostgresStore(conn)).signal(theirs, "note", "bob's")

    with scoped(as_app(), alice) as c:
        steps = c.execute("select job_id from tickq.job_steps").fetchall()
        signals = c.execute("select job_id from tickq.job_signals").fetchall()
    assert steps == [(mine,)] and signals == []
    with pytest.raises(JobNotFound):
        StepStore(PostgresStore(as_app(), user_id=alice)).show(theirs)


def test_app_signals_its_own_waiting_job_and_wakes_it(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    job_id = job_with_a_step(conn, alice)

    woke = StepStore(PostgresStore(as_app(), user_id=alice)).signal(job_id, "go", {"ok": 1})

    assert woke is True
    job = PostgresStore(conn).get(job_id)
    assert job.run_after <= PostgresStore(conn).now()


def test_app_cannot_signal_another_users_job(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    theirs = job_with_a_step(conn, bob)
    with pytest.raises(JobNotFound):
        StepStore(PostgresStore(as_app(), user_id=alice)).signal(theirs, "go")
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(
            "insert into tickq.job_signals (job_id, name, size, sent_at)"
            " values (%s, 'go', 0, now())",
            (theirs,),
        )
    assert conn.execute("select count(*) from tickq.job_signals").fetchone() == (0,)


@pytest.mark.parametrize(
    "assignment",
    [
        # Waking a job that waits for nothing, or for another signal.
        "signals = array['other'], run_after = now() - interval '1 day'",
        # Making up a wait, to be woken by it later.
        "wait_kind = 'signal', wait_name = 'x'",
        "resumes = 99",
        # Clearing the wait of a live job.
        "wait_kind = null, wait_name = null, wait_until = null, signals = null",
    ],
)
def test_app_cannot_move_or_forge_its_jobs_through_the_step_columns(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, assignment: str
) -> None:
    job_id = job_with_a_step(conn, alice)
    before = conn.execute("select * from tickq.jobs").fetchall()
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(f"update tickq.jobs set {assignment} where id = %s", (job_id,))
    assert conn.execute("select * from tickq.jobs").fetchall() == before


def test_app_cannot_write_or_delete_a_live_jobs_steps(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    job_id = job_with_a_step(conn, alice)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(
            "insert into tickq.job_steps (job_id, name, size, finished_at)"
            " values (%s, 'forged', 0, now())",
            (job_id,),
        )
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute("delete from tickq.job_steps where job_id = %s", (job_id,))
    assert conn.execute("select count(*) from tickq.job_steps").fetchone() == (1,)


@pytest.mark.parametrize(
    "statement",
    [
        "delete from tickq.job_signals where job_id = %s",
        # Taking the signal back under another name, or changing what it carried.
        "update tickq.job_signals set name = 'other' where job_id = %s",
        "update tickq.job_signals set payload = '\"forged\"', size = 8 where job_id = %s",
        "update tickq.job_signals set sent_at = now() - interval '1 day' where job_id = %s",
    ],
)
def test_app_cannot_delete_or_change_a_live_jobs_signals(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, statement: str
) -> None:
    # Given a live job of Alice's holding a signal
    job_id = job_with_a_step(conn, alice)
    StepStore(PostgresStore(conn)).signal(job_id, "note", {"kept": True})
    before = conn.execute("select * from tickq.job_signals").fetchall()

    # Then Alice's application login may neither delete nor change it
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(statement, (job_id,))
    assert conn.execute("select * from tickq.job_signals").fetchall() == before


def test_worker_role_stores_steps_for_every_user_and_is_fenced(
    as_worker: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    job_id = job_with_a_step(conn, alice, waiting=False)
    worker = StepStore(PostgresStore(as_worker()))
    job = PostgresStore(conn).get(job_id)
    assert job.lease_token is not None

    worker.complete(job_id, job.lease_token, "next", "1")
    with pytest.raises(LeaseLost):
        worker.complete(job_id, job_id, "forged", "1")  # not the lease token
    assert [s["name"] for s in worker.show(job_id).steps] == ["fetch", "next"]
