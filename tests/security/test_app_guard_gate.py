"""The application guard's trigger condition is its gate alone (schema/triggers.sql): the
exemptions for signals and fresh retries live in the guard function, and still let an
application's signal and fresh retry through while refusing the rest."""

from __future__ import annotations

from uuid import UUID

import psycopg
import psycopg.errors
import pytest

from queue_core import StepStore
from queue_core.model.validation import job_spec
from queue_core.policies import partitions
from queue_core.postgres import PostgresStore
from tests.security.conftest import RoleConnect
from tests.security.test_row_level_security import scoped
from tests.security.test_steps_security import job_with_a_step

GATE = "WHEN ((COALESCE(current_setting('tickq.user_id'::text, true), ''::text) <> ''::text))"


def test_the_guard_fires_on_the_gate_alone_on_the_table_and_every_partition(
    conn: psycopg.Connection,
) -> None:
    # A worker's statement compiles the trigger's condition, never the guard's body: the
    # condition must stay this one comparison (see queue_core/schema/triggers.sql). Another
    # test on this database may have dropped every day partition (retention): make today's.
    partitions.ensure(conn, days_ahead=0)
    rows = conn.execute(
        "select c.relname, pg_get_triggerdef(t.oid) from pg_trigger t"
        " join pg_class c on c.oid = t.tgrelid"
        " where t.tgname = 'jobs_app_guard' order by 1"
    ).fetchall()
    relations = {name for name, _ in rows}
    assert {"jobs", "jobs_live", "jobs_done", "jobs_done_default"} <= relations
    assert any(name.startswith("jobs_done_2") for name in relations), relations
    for name, definition in rows:
        assert GATE in definition, (name, definition)
        assert definition.endswith(GATE + " EXECUTE FUNCTION tickq.jobs_app_guard()"), (
            name,
            definition,
        )


def test_an_app_fresh_retry_forgets_the_steps_of_its_own_cancelled_job(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    # Given a job of alice's with a stored step, cancelled while it waited for a signal
    job_id = job_with_a_step(conn, alice)
    PostgresStore(conn).cancel(job_id)

    # When alice retries it afresh, as an application
    job = StepStore(PostgresStore(as_app(), user_id=alice)).retry(job_id, fresh=True)

    # Then the guard let the reset of its wait and signals through, and the job is queued
    assert job.status.value == "queued"
    view = StepStore(PostgresStore(conn)).show(job_id)
    assert view.steps == [] and view.wait is None


def test_an_app_still_cannot_move_a_job_without_a_signal_it_waits_for(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    # Given alice's job waiting for the signal "go"
    job_id = job_with_a_step(conn, alice)
    before = conn.execute("select run_after from tickq.jobs where id = %s", (job_id,)).fetchone()

    # When an application names another signal and makes the job run now
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(
            "update tickq.jobs set signals = array['other'], run_after = now() - interval '1 day'"
            " where id = %s",
            (job_id,),
        )

    # Then the guard refused it
    after = conn.execute("select run_after from tickq.jobs where id = %s", (job_id,)).fetchone()
    assert after == before


def test_an_app_cannot_make_a_job_waiting_for_no_signal_run_early_by_naming_one(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    # Given alice's job delayed by a day, waiting for no signal (its wait columns are null)
    store = PostgresStore(conn)
    job = store.enqueue(job_spec("t", user_id=alice, delay=86_400)).job
    before = conn.execute("select run_after from tickq.jobs where id = %s", (job.id,)).fetchone()

    # When an application names a signal and moves the job's run_after to now
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(
            "update tickq.jobs set signals = array['go'], run_after = now() where id = %s",
            (job.id,),
        )

    # Then the guard refused it (a null in its exemptions once let it through)
    after = conn.execute("select run_after from tickq.jobs where id = %s", (job.id,)).fetchone()
    assert after == before
