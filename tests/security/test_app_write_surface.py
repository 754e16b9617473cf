"""The application login writes only through functions, and each of them holds.

tickq_app reads its own rows and writes none: its whole write surface is tickq.enqueue_many,
tickq.cancel, tickq.retry, tickq.signal and tickq.publish (and tickq.enqueue, which goes
through enqueue_many for a user). Each takes the owner from the session and the time from
the database, refuses without a user, checks every argument against the bounds the HTTP API
applies, and writes nothing when it refuses. Before, the same login inserted and updated the
jobs itself (guarded by triggers): it chose job ids equal to another tenant's, wrote another
tenant's settlements and could hold a gate key's advisory lock.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID, uuid4

import psycopg
import psycopg.errors
import pytest

from queue_core import bounds
from queue_core.model import dependencies, flow, jobs, json_text, steps, validation
from queue_core.model.job_batch import JobBatch
from queue_core.policies.outbox import _MAX_DETAIL_BYTES
from queue_core.postgres import PostgresStore
from tests.security.conftest import RoleConnect

JOB_TABLES = (
    "tickq.jobs",
    "tickq.job_keys",
    "tickq.job_steps",
    "tickq.job_signals",
    "tickq.job_dependencies",
    "tickq.job_settlements",
    "tickq.job_gates",
    "tickq.outbox",
)


@contextmanager
def scoped(conn: psycopg.Connection, user: UUID | None) -> Iterator[psycopg.Connection]:
    """One transaction in which the application acts for `user` (None: names nobody)."""
    with conn.transaction():
        if user is not None:
            conn.execute("select set_config('tickq.user_id', %s, true)", (str(user),))
        yield conn


def counts(conn: psycopg.Connection) -> dict[str, int]:
    found = {}
    for table in JOB_TABLES:
        row = conn.execute(f"select count(*) from {table}").fetchone()
        assert row is not None
        found[table] = row[0]
    return found


def enqueue_many(conn: psycopg.Connection, *requests: dict[str, Any]) -> list[tuple[Any, ...]]:
    return conn.execute(
        "select request, id, status, outcome from tickq.enqueue_many(%s::jsonb)",
        (json.dumps(list(requests)),),
    ).fetchall()


def dead_job(conn: psycopg.Connection, owner: UUID) -> UUID:
    store = PostgresStore(conn)
    job_id = store.enqueue(validation.job_spec("t", user_id=owner, max_attempts=1)).id
    store.cancel(job_id)
    return job_id


# -- One set of bounds ---------------------------------------------------------------------


def test_the_sql_bounds_are_the_python_bounds(conn: psycopg.Connection) -> None:
    row = conn.execute("select tickq.enqueue_bounds()").fetchone()
    assert row is not None
    assert row[0] == {
        "max_name": validation.MAX_NAME,
        "max_key": validation.MAX_KEY,
        "max_payload_bytes": json_text.MAX_PAYLOAD_BYTES,
        "max_json_depth": json_text.MAX_JSON_DEPTH,
        "max_attempts": validation.MAX_ATTEMPTS_LIMIT,
        "max_priority": validation.INT32,
        "max_lease_seconds": validation.MAX_LEASE_SECONDS,
        "max_timeout_seconds": validation.MAX_TIMEOUT_SECONDS,
        "timeout_lease_margin": jobs.TIMEOUT_LEASE_MARGIN,
        "max_delay_seconds": validation.MAX_DELAY_SECONDS,
        "max_backoff_base": bounds.MAX_BACKOFF_BASE,
        "min_backoff_factor": bounds.MIN_BACKOFF_FACTOR,
        "max_backoff_factor": bounds.MAX_BACKOFF_FACTOR,
        "max_backoff_max": bounds.MAX_BACKOFF_MAX,
        "max_parents": dependencies.MAX_PARENTS,
        "max_flow_keys": flow.MAX_KEYS,
        "max_flow_key": flow.MAX_KEY,
        "max_batch": 1000,
        "max_signal_bytes": steps.MAX_SIGNAL_BYTES,
        "max_signals": steps.MAX_SIGNALS,
        "max_detail_type": 128,
        "max_source": 256,
        "max_detail_bytes": _MAX_DETAIL_BYTES,
    }


# -- No table takes a write; no function takes an owner or a clock -------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "insert into tickq.jobs (type, user_id) values ('t', %(me)s)",
        "update tickq.jobs set priority = 1",
        "delete from tickq.jobs",
        "insert into tickq.job_keys (idempotency_key, user_id, job_id)"
        " values ('k', %(me)s, gen_random_uuid())",
        "insert into tickq.job_settlements (parent_id, status, root_id, root_status, user_id)"
        " values (gen_random_uuid(), 'succeeded', gen_random_uuid(), 'succeeded', %(me)s)",
        "delete from tickq.job_settlements",
        "insert into tickq.outbox (user_id, source, detail_type, detail)"
        " values (%(me)s, 'app', 'x', '{}')",
        'select * from tickq.enqueue_job(%(other)s, \'{"type": "t"}\')',
        "select * from tickq.jobs_cancel(array[gen_random_uuid()], now(), %(other)s)",
        "select * from tickq.jobs_retry(array['dead'], null, null, null, 10, now(), null)",
        "select * from tickq.job_signals_send(gen_random_uuid(), 'n', 'null', 4, 10, 10, now())",
        "select tickq.job_durable_clear(gen_random_uuid())",
        "select tickq.job_steps_forget_from(gen_random_uuid(), 's')",
        "select tickq.job_compensation_clear(gen_random_uuid())",
        "select * from tickq.job_gate('debounce', 'k', %(other)s, 5, null, '{}', now(),"
        " gen_random_uuid())",
        "select * from tickq.job_gate_turns",
        "select * from tickq.job_ids",
        "insert into tickq.flow_holds (key, until) values ('k', now())",
        "insert into tickq.flow_limits (prefix, max_running) values ('k', 1)",
        "select * from tickq.flow_holds",
        "select tickq.flow_log(array['k'], now())",
        "select * from tickq.flow_admit(array[gen_random_uuid()], now())",
    ],
)
def test_the_application_login_writes_no_table_and_names_no_owner_or_clock(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID, statement: str
) -> None:
    PostgresStore(conn).enqueue(validation.job_spec("t", user_id=bob))
    before = counts(conn)
    with (
        pytest.raises(psycopg.errors.InsufficientPrivilege),
        scoped(as_app(), alice) as c,
    ):
        c.execute(statement, {"me": alice, "other": bob})
    assert counts(conn) == before


# -- Each function refuses without a user and writes nothing --------------------------------


@pytest.mark.parametrize(
    "call",
    [
        'select * from tickq.enqueue_many(\'[{"type": "t"}]\')',
        "select * from tickq.cancel(%(job)s)",
        "select * from tickq.retry(%(job)s)",
        "select tickq.signal(%(job)s, 'go')",
        "select * from tickq.publish('x', '{}')",
        "select tickq.enqueue('t')",
    ],
)
def test_every_function_refuses_a_login_that_names_no_user(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, call: str
) -> None:
    job = dead_job(conn, alice)
    before = counts(conn)
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="transaction's user"):
        as_app().execute(call, {"job": job})
    assert counts(conn) == before


@pytest.mark.parametrize(
    "call",
    [
        "select * from tickq.cancel(%(job)s)",
        "select * from tickq.retry(%(job)s)",
        "select tickq.signal(%(job)s, 'go')",
    ],
)
def test_another_owners_job_is_not_found_and_unchanged(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID, call: str
) -> None:
    store = PostgresStore(conn)
    live = store.enqueue(validation.job_spec("t", user_id=bob)).id
    dead = dead_job(conn, bob)
    before = conn.execute("select * from tickq.jobs order by id").fetchall()
    for job in (live, dead):
        with pytest.raises(psycopg.errors.NoDataFound), scoped(as_app(), alice) as c:
            c.execute(call, {"job": job})
    assert conn.execute("select * from tickq.jobs order by id").fetchall() == before


# -- The owner, the time and the id are the database's --------------------------------------


def test_an_enqueue_takes_the_owner_the_clock_and_the_id_from_the_database(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    with scoped(as_app(), alice) as c:
        ((_, job_id, status, outcome),) = enqueue_many(
            c, {"type": "t", "group": "g", "run_after": "1970-01-01T00:00:00Z"}
        )
    row = conn.execute(
        "select user_id, group_key, run_after >= created_at, created_at > now() - interval '1 min'"
        " from tickq.jobs where id = %s",
        (job_id,),
    ).fetchone()
    assert (status, outcome) == ("queued", "created")
    assert row == (alice, f"{alice}/g", True, True)
    assert UUID(str(job_id)).version == 7


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        ({"type": "t", "id": str(uuid4())}, "id"),
        ({"type": "t", "user_id": str(uuid4())}, "user_id"),
        ({"type": "t", "created_at": "2020-01-01T00:00:00Z"}, "created_at"),
        ({"type": "t", "status": "running"}, "status"),
        ({"type": "bad type"}, "type"),
        ({"type": "t", "queue": ""}, "queue"),
        ({"type": "t", "payload": [1]}, "payload"),
        ({"type": "t", "payload": {"x": "y" * json_text.MAX_PAYLOAD_BYTES}}, "payload"),
        ({"type": "t", "payload": {"deep": json.loads("[" * 64 + "]" * 64)}}, "payload"),
        ({"type": "t", "idempotency_key": "k" * 256}, "idempotency_key"),
        ({"type": "t", "priority": 2**31}, "priority"),
        ({"type": "t", "priority": 1.5}, "priority"),
        ({"type": "t", "max_attempts": 0}, "max_attempts"),
        ({"type": "t", "max_attempts": 1001}, "max_attempts"),
        ({"type": "t", "lease_seconds": 43_201}, "lease_seconds"),
        ({"type": "t", "lease_seconds": "30"}, "lease_seconds"),
        ({"type": "t", "delay": -1}, "delay"),
        ({"type": "t", "delay": 1e300}, "delay"),
        ({"type": "t", "run_after": "10000-01-01T00:00:00Z"}, "run_after"),
        ({"type": "t", "run_after": "2100-01-01T00:00:00Z"}, "run_after"),
        ({"type": "t", "run_after": "-infinity"}, "run_after"),
        ({"type": "t", "backoff": {"base": 1e300}}, "backoff"),
        ({"type": "t", "backoff": {"base": 0}}, "backoff"),
        ({"type": "t", "backoff": {"factor": 1000}}, "backoff"),
        ({"type": "t", "backoff": {"max": 1e300}}, "backoff"),
        ({"type": "t", "backoff": {"jitter": 2}}, "backoff"),
        ({"type": "t", "backoff": {"base": 10, "max": 5}}, "backoff"),
        ({"type": "t", "backoff": {"other": 1}}, "backoff"),
        ({"type": "t", "group": "a b"}, "group"),
        ({"type": "t", "timeout": 0}, "timeout"),
        ({"type": "t", "timeout": 1.5}, "timeout"),
        ({"type": "t", "timeout": 43201}, "timeout"),
        ({"type": "t", "timeout": "5"}, "timeout"),
        ({"type": "t", "group": "g" * 100}, "group"),
        ({"type": "t", "debounce": {"key": "k", "seconds": 1e300}}, "debounce.seconds"),
        ({"type": "t", "debounce": {"key": "k", "seconds": 0}}, "debounce.seconds"),
        ({"type": "t", "debounce": {"key": "", "seconds": 5}}, "debounce.key"),
        (
            {"type": "t", "debounce": {"key": "k", "seconds": 5, "max_seconds": 1}},
            "debounce.max_seconds",
        ),
        ({"type": "t", "throttle": {"key": "k", "seconds": 5, "max_seconds": 9}}, "throttle"),
        (
            {"type": "t", "debounce": {"key": "k", "seconds": 5}, "idempotency_key": "k"},
            "debounce",
        ),
        ({"type": "t", "debounce": {"key": "k", "seconds": 5}, "delay": 1}, "debounce"),
        (
            {
                "type": "t",
                "debounce": {"key": "k", "seconds": 5},
                "throttle": {"key": "k", "seconds": 5},
            },
            "throttle",
        ),
        ({"type": "t", "after": "not a list"}, "after"),
        ({"type": "t", "after": [1]}, "after"),
        ({"type": "t", "after": ["nope"]}, "after"),
        ({"type": "t", "after": [str(uuid4()) for _ in range(101)]}, "after"),
    ],
)
def test_a_bad_request_is_refused_naming_its_field_and_writes_nothing(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, request_: dict[str, Any], field: str
) -> None:
    before = counts(conn)
    app = as_app()
    with (
        pytest.raises(psycopg.errors.InvalidParameterValue) as refused,
        scoped(app, alice) as c,
    ):
        # A good request first: the bad one refuses the whole call.
        enqueue_many(c, {"type": "t", "idempotency_key": "first"}, request_)
    assert refused.value.diag.column_name == field, refused.value.diag.message_primary
    assert "job 1" in (refused.value.diag.message_primary or "")
    assert counts(conn) == before


def test_a_timeout_is_stored_and_its_lease_covers_it(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    with scoped(as_app(), alice) as c:
        rows = enqueue_many(
            c,
            {"type": "t", "timeout": 5},  # no lease: the timeout and its margin
            {"type": "t", "timeout": 5, "lease_seconds": 60},  # a longer lease stays
            {"type": "t", "timeout": 5, "lease_seconds": 6},  # a shorter one is raised
            {"type": "t", "timeout": 43200},  # within the largest lease
            {"type": "t", "timeout": 5, "idempotency_key": "k"},  # the keyed path
            {"type": "t"},
        )
    stored = [
        conn.execute(
            "select timeout_seconds, lease_seconds from tickq.jobs where id = %s", (row[1],)
        ).fetchone()
        for row in rows
    ]
    margin = jobs.TIMEOUT_LEASE_MARGIN
    assert stored == [
        (5, 5 + margin),
        (5, 60),
        (5, 5 + margin),
        (43200, 43200),
        (5, 5 + margin),
        (None, None),
    ]


def test_a_batch_is_bounded(as_app: RoleConnect, conn: psycopg.Connection, alice: UUID) -> None:
    with (
        pytest.raises(psycopg.errors.InvalidParameterValue) as refused,
        scoped(as_app(), alice) as c,
    ):
        enqueue_many(c, *[{"type": "t"}] * 1001)
    assert refused.value.diag.column_name == "jobs"
    assert counts(conn)["tickq.jobs"] == 0


def test_a_graph_goes_in_one_call_and_parents_must_be_the_owners(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    bobs = PostgresStore(conn).enqueue(validation.job_spec("t", user_id=bob)).id
    with scoped(as_app(), alice) as c:
        rows = enqueue_many(c, {"type": "a"}, {"type": "b", "after": [0]}, {"type": "c"})
    assert [(r[0], r[2]) for r in rows] == [(0, "queued"), (1, "waiting"), (2, "queued")]
    before = counts(conn)
    with pytest.raises(psycopg.Error) as refused, scoped(as_app(), alice) as c:
        enqueue_many(c, {"type": "x", "after": [str(bobs)]})
    assert refused.value.sqlstate == "TQ404"
    assert "not found" in str(refused.value)
    assert counts(conn) == before


# -- Ids are unique across every partition, and never change --------------------------------


def test_no_role_can_insert_a_job_with_an_id_another_job_holds(
    as_worker: RoleConnect, conn: psycopg.Connection, bob: UUID
) -> None:
    finished = dead_job(conn, bob)  # in a finished jobs' partition
    live = PostgresStore(conn).enqueue(validation.job_spec("t", user_id=bob)).id
    for taken in (finished, live):
        for login in (as_worker(), conn):
            with pytest.raises(psycopg.errors.UniqueViolation) as refused, login.transaction():
                login.execute(
                    "insert into tickq.jobs (id, type, user_id, status, finished_at)"
                    " values (%s, 't', %s, 'queued', null)",
                    (taken, bob),
                )
            assert refused.value.diag.constraint_name == "job_ids_pkey"
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (2,)


def test_a_jobs_id_never_changes(conn: psycopg.Connection, bob: UUID) -> None:
    job = PostgresStore(conn).enqueue(validation.job_spec("t", user_id=bob)).id
    with pytest.raises(psycopg.Error, match="never changes"), conn.transaction():
        conn.execute("update tickq.jobs set id = gen_random_uuid() where id = %s", (job,))


def test_an_id_is_free_again_once_its_job_is_deleted(conn: psycopg.Connection) -> None:
    job = uuid4()
    conn.execute("insert into tickq.jobs (id, type) values (%s, 't')", (job,))
    conn.execute("delete from tickq.jobs where id = %s", (job,))
    conn.execute("insert into tickq.jobs (id, type) values (%s, 't')", (job,))
    assert conn.execute("select count(*) from tickq.job_ids").fetchone() == (1,)


# -- Settlements: oldest first, written by the engine alone ---------------------------------


def test_settlements_are_worked_off_oldest_first_whatever_comes_later(
    conn: psycopg.Connection, alice: UUID
) -> None:
    store = PostgresStore(conn)
    parent = store.enqueue(validation.job_spec("t", user_id=alice)).id
    (child,) = store.enqueue_after(
        JobBatch.of([validation.job_spec("t", user_id=alice)]), [(parent,)]
    )
    # The parent's success as a settlement still to work off, then a flood of later ones
    # whose order used to come first (a lower root, the same status).
    conn.execute(
        "update tickq.jobs set status = 'succeeded', finished_at = now() where id = %s", (parent,)
    )
    conn.execute(
        "insert into tickq.job_settlements (parent_id, status, root_id, root_status, created_at)"
        " values (%s, 'succeeded', %s, 'succeeded', now() - interval '1 minute')",
        (parent, parent),
    )
    conn.execute(
        "insert into tickq.job_settlements (parent_id, status, root_id, root_status)"
        " select gen_random_uuid(), 'succeeded', '00000000-0000-0000-0000-000000000000',"
        " 'succeeded' from generate_series(1, 500)"
    )
    conn.execute("select tickq.jobs_settle_pending(10, null)")
    assert store.get(child.id).status.value == "queued"


# -- The gate's turn is no lock another login can hold ---------------------------------------


def test_holding_the_old_advisory_lock_does_not_stop_a_gated_enqueue(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    holder = as_app()
    holder.execute("select pg_advisory_lock(hashtextextended(%s, 0))", (f"debounce/{alice}/k",))
    app = as_app()
    app.execute("set statement_timeout = '5s'")
    with scoped(app, alice) as c:
        rows = enqueue_many(c, {"type": "t", "debounce": {"key": "k", "seconds": 60}})
    assert rows[0][3] == "created"
    assert conn.execute("select count(*) from tickq.job_gate_turns").fetchone() == (0,)


# -- Event sources -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source", ["tickq", "TickQ", "tickq.jobs", "tickq ", "tickq\u200b", "café", "a b", ""]
)
def test_an_event_source_is_plain_ascii_and_never_tickqs(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, source: str
) -> None:
    with (
        pytest.raises(psycopg.errors.InvalidParameterValue) as refused,
        scoped(as_app(), alice) as c,
    ):
        c.execute("select * from tickq.publish('x', '{}', %s)", (source,))
    assert refused.value.diag.column_name == "source"
    assert counts(conn)["tickq.outbox"] == 0


def test_an_application_publishes_under_its_own_source_or_the_default(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    with scoped(as_app(), alice) as c:
        c.execute("select * from tickq.publish('x', '{}')")
        c.execute("select * from tickq.publish('x', '{}', 'acme.billing')")
    rows = conn.execute("select user_id, source from tickq.outbox order by id").fetchall()
    assert rows == [(alice, "tickq.app"), (alice, "acme.billing")]
