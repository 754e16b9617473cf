"""A malicious tenant's attacks on the others, replayed through the interface each used:
the HTTP API (ApiFunction's handler) or SQL as the tickq_app login. Each is refused with a
clear error and writes nothing, or leaves the victim served."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import psycopg
import psycopg.errors
import pytest

from queue_core import JobBatch, JobContext, PostgresStore, Registry, Runner
from queue_core.model import validation
from queue_core.policies.limits import Limits, queue_limit
from tests.functions.conftest import FakeContext, http_event
from tests.security.conftest import RoleConnect
from tickq.functions import api

Api = Callable[..., tuple[int, Any]]


@pytest.fixture
def call(function_env: None, monkeypatch: pytest.MonkeyPatch, app_url: str, tasks: object) -> Api:
    """ApiFunction on the application login, serving the queues default and bulk."""
    monkeypatch.setenv("TICKQ_DATABASE_URL", app_url)
    monkeypatch.setenv("TICKQ_QUEUES", "default,bulk")

    def invoke(method: str, path: str, **options: Any) -> tuple[int, Any]:
        response = api.handler(http_event(method, path, **options), FakeContext())
        body = response.get("body")
        return response["statusCode"], json.loads(body) if body else None

    return invoke


@contextmanager
def scoped(conn: psycopg.Connection, user: UUID) -> Iterator[psycopg.Connection]:
    """One transaction in which the application acts for `user`."""
    with conn.transaction():
        conn.execute("select set_config('tickq.user_id', %s, true)", (str(user),))
        yield conn


def rows(conn: psycopg.Connection) -> list[tuple[object, ...]]:
    return conn.execute(
        "select id, user_id, status, attempts, run_after, finished_at, error, signals,"
        " wait_kind, wait_name, resumes, cancel_requested from tickq.jobs order by id"
    ).fetchall()


def seed(conn: psycopg.Connection, user: UUID, **options: Any) -> UUID:
    return PostgresStore(conn).enqueue(validation.job_spec("t", user_id=user, **options)).id


# Bounds for outside callers -------------------------------------------------------------


def test_the_api_refuses_a_run_after_more_than_366_days_ahead(
    call: Api, conn: psycopg.Connection
) -> None:
    for when, reason in (("2100-01-01", "366 days"), ("9999-12-31", "finite dates")):
        status, body = call(
            "POST", "/jobs", body={"type": "t", "run_after": f"{when}T00:00:00Z"}, sub=uuid4()
        )
        assert (status, body["field"]) == (422, "run_after")
        assert reason in body["message"]
    assert rows(conn) == []
    ok, _ = call("POST", "/jobs", body={"type": "t", "delay": 366 * 86_400}, sub=uuid4())
    assert ok == 202


@pytest.mark.parametrize("when", ["9999-12-31", "infinity", "-infinity", "10000-01-01"])
def test_the_app_role_cannot_insert_a_job_far_ahead_or_unreadable(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, when: str
) -> None:
    # The application login's one way in (tickq.enqueue_many) refuses a time more than 366
    # days ahead, or one no worker can read, naming the field; a plain insert is no way in.
    with (
        pytest.raises(psycopg.errors.InvalidParameterValue, match="run_after") as refused,
        scoped(as_app(), alice) as c,
    ):
        c.execute(
            "select * from tickq.enqueue_many(jsonb_build_array("
            "jsonb_build_object('type', 't', 'run_after', %s::text)))",
            (when,),
        )
    assert refused.value.diag.column_name == "run_after"
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(
            "insert into tickq.jobs (type, user_id, run_after) values ('t', %s, %s)", (alice, when)
        )
    assert rows(conn) == []


def test_max_depth_counts_children_waiting_for_a_parent(
    call: Api, conn: psycopg.Connection
) -> None:
    Limits(conn).set_queue(queue_limit("bulk", max_depth=3))
    bob = uuid4()
    status, parent = call("POST", "/jobs", body={"type": "t"}, sub=bob)
    assert status == 202
    answers = [
        call("POST", "/jobs", body={"type": "t", "queue": "bulk", "after": [parent["id"]]}, sub=bob)
        for _ in range(5)
    ]
    assert [s for s, _ in answers] == [202, 202, 202, 429, 429]
    waiting = conn.execute("select count(*) from tickq.jobs where queue = 'bulk'").fetchone()
    assert waiting == (3,)


def test_max_depth_per_owner_leaves_room_for_other_owners(
    call: Api, conn: psycopg.Connection
) -> None:
    Limits(conn).set_queue(queue_limit("bulk", max_depth_per_owner=2))
    bob, alice = uuid4(), uuid4()
    bobs = [call("POST", "/jobs", body={"type": "t", "queue": "bulk"}, sub=bob) for _ in range(4)]
    assert [s for s, _ in bobs] == [202, 202, 429, 429]
    assert bobs[2][1]["queue"] == "bulk"
    alices, _ = call("POST", "/jobs", body={"type": "t", "queue": "bulk"}, sub=alice)
    assert alices == 202
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (3,)


def test_a_map_of_a_callers_job_stays_within_the_owners_depth_cap(
    call: Api, conn: psycopg.Connection, tasks: Registry
) -> None:
    """An API caller's handler maps over a list the caller sized: its children are the
    caller's jobs, enqueued on the worker's login, and count against the caller's cap in the
    queue all the same. A map that would pass it enqueues none and snoozes."""

    @tasks.task("part")
    def part(job: JobContext) -> int:
        return int(job.payload["n"])

    @tasks.task("fan", backoff={"base": 0.001, "max": 0.001})
    def fan(job: JobContext) -> int:
        return sum(job.map("parts", "part", [{"n": n} for n in range(job.payload["n"])]))

    Limits(conn).set_queue(queue_limit("default", max_depth_per_owner=3))
    try:
        bob = uuid4()
        status, _ = call("POST", "/jobs", body={"type": "fan", "payload": {"n": 500}}, sub=bob)
        assert status == 202
        worker = PostgresStore(conn)
        with Runner(worker, tasks, rand=lambda: 0.0) as runner:
            report = runner.tick()
        assert report.snoozed == 1
        mine = "select count(*) from tickq.jobs"  # the caller's: the only ones
        assert conn.execute(mine).fetchone() == (1,)  # the parent alone
        # The caller's own room is unchanged: two more, then refused.
        answers = [call("POST", "/jobs", body={"type": "part", "payload": {"n": 1}}, sub=bob)]
        answers.append(call("POST", "/jobs", body={"type": "part", "payload": {"n": 1}}, sub=bob))
        answers.append(call("POST", "/jobs", body={"type": "part", "payload": {"n": 1}}, sub=bob))
        assert [s for s, _ in answers] == [202, 202, 429]
        assert conn.execute(mine).fetchone() == (3,)
    finally:
        Limits(conn).clear_queue("default")


def test_signals_per_job_are_bounded(call: Api, conn: psycopg.Connection) -> None:
    bob = uuid4()
    _, job = call("POST", "/jobs", body={"type": "t"}, sub=bob)
    for n in range(100):
        assert call("POST", f"/jobs/{job['id']}/signals/s{n}", sub=bob)[0] == 202
    status, body = call("POST", f"/jobs/{job['id']}/signals/s100", sub=bob)
    assert (status, body["field"]) == (422, "signal")
    assert "at most 100 signals" in body["message"]
    held = conn.execute("select count(*) from tickq.job_signals").fetchone()
    assert held == (100,)


def test_the_app_role_cannot_insert_signals_past_the_bound_in_sql(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    job = seed(conn, alice)
    insert = (
        "insert into tickq.job_signals (job_id, name, size, sent_at)"
        " select %s, 's' || n, 0, now() from generate_series(1, %s) n"
    )
    # Signals come in through tickq.signal alone (bounded there and by the API's test above).
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(insert, (job, 101))
    assert conn.execute("select count(*) from tickq.job_signals").fetchone() == (0,)


def test_children_per_parent_are_bounded(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    parent = seed(conn, alice)
    store = PostgresStore(as_app(), user_id=alice)
    spec = validation.job_spec("t", user_id=alice)
    store.enqueue_after(JobBatch.of([spec] * 1000), [(parent,)] * 1000)
    with pytest.raises(validation.InvalidJob, match="at most 1000 children"):
        store.enqueue_after(JobBatch.of([spec]), [(parent,)])
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (1001,)


# The guard -------------------------------------------------------------------------------


def test_the_guard_cannot_be_walked_past_in_two_statements(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    job = seed(conn, alice, run_after=datetime(2030, 1, 1, tzinfo=UTC))
    before = rows(conn)
    app = as_app()
    walk = [
        "update tickq.jobs set signals = '{go}', wait_kind = 'signal', wait_name = 'go',"
        " resumes = 99 where id = %s",
        "update tickq.jobs set signals = array_append(signals, 'again'),"
        " run_after = '1970-01-01Z' where id = %s",
    ]
    for statement in walk:  # each in a transaction of its own, as an attacker would
        with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(app, alice) as c:
            c.execute(statement, (job,))
    assert rows(conn) == before


@pytest.mark.parametrize("when", ["-infinity", "infinity", "10000-01-01"])
def test_a_retry_cannot_write_a_time_a_worker_could_not_read(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, when: str
) -> None:
    job = seed(conn, alice)
    PostgresStore(conn).cancel(job)
    before = rows(conn)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(
            "update tickq.jobs set status = 'queued', attempts = 0, finished_at = null,"
            " run_after = %s where id = %s",
            (when, job),
        )
    assert rows(conn) == before


@pytest.mark.parametrize("when", ["-infinity", "10000-01-01"])
def test_a_cancel_cannot_write_a_time_a_worker_could_not_read(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, when: str
) -> None:
    job = seed(conn, alice)
    before = rows(conn)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(
            "update tickq.jobs set status = 'cancelled', finished_at = %s where id = %s",
            (when, job),
        )
    assert rows(conn) == before


def test_a_signal_cannot_wake_a_job_to_a_time_a_worker_could_not_read(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    job = seed(conn, alice)
    conn.execute(
        "update tickq.jobs set wait_kind = 'signal', wait_name = 'go', resumes = 1,"
        " run_after = '2030-01-01Z' where id = %s",
        (job,),
    )
    before = rows(conn)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(
            "update tickq.jobs set signals = '{go}', run_after = '-infinity' where id = %s",
            (job,),
        )
    assert rows(conn) == before


@pytest.mark.parametrize(
    "change",
    [
        "status = 'cancelled', finished_at = now(), error = 'anything'",
        "status = 'cancelled', finished_at = now(), error = 'parent "
        "00000000-0000-0000-0000-000000000000 is dead'",
    ],
)
def test_the_app_role_cannot_write_an_error_on_cancel(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, change: str
) -> None:
    job = seed(conn, alice)
    before = rows(conn)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(f"update tickq.jobs set {change} where id = %s", (job,))
    assert rows(conn) == before


def test_the_app_role_cannot_write_an_error_on_retry(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    job = seed(conn, alice)
    PostgresStore(conn).cancel(job)
    before = rows(conn)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), scoped(as_app(), alice) as c:
        c.execute(
            "update tickq.jobs set status = 'queued', attempts = 0, finished_at = null,"
            " error = 'forged' where id = %s",
            (job,),
        )
    assert rows(conn) == before


def test_a_parents_failure_still_cancels_its_waiting_children_with_the_error(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    parent = seed(conn, alice)
    store = PostgresStore(as_app(), user_id=alice)
    spec = validation.job_spec("t", user_id=alice)
    (child,) = store.enqueue_after(JobBatch.of([spec]), [(parent,)])
    store.cancel(parent)
    assert PostgresStore(conn).get(child.id).error == f"parent {parent} is cancelled"


@pytest.mark.parametrize("foreign", ["parent", "child"])
def test_the_app_role_cannot_link_its_jobs_to_another_owners(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID, foreign: str
) -> None:
    alices, bobs = seed(conn, alice), seed(conn, bob)
    child, parent = (bobs, alices) if foreign == "parent" else (alices, bobs)
    refused = pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied")
    with refused, scoped(as_app(), bob) as c:
        c.execute(
            "insert into tickq.job_dependencies (child_id, parent_id, user_id) values (%s, %s, %s)",
            (child, parent, bob),
        )
    assert conn.execute("select count(*) from tickq.job_dependencies").fetchone() == (0,)


# API transactions ------------------------------------------------------------------------


def test_an_api_statement_that_waits_too_long_is_cancelled(
    call: Api, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch, worker_url: str
) -> None:
    monkeypatch.setenv("TICKQ_API_STATEMENT_TIMEOUT_MS", "300")
    bob = uuid4()
    job = seed(conn, bob)
    answer: list[int] = []
    with psycopg.connect(worker_url) as holder:
        holder.execute("select 1 from tickq.jobs where id = %s for update", (job,))
        request = threading.Thread(
            target=lambda: answer.append(call("POST", f"/jobs/{job}/cancel", sub=bob)[0])
        )
        started = time.monotonic()
        request.start()
        request.join(timeout=30)
        waited = time.monotonic() - started
        holder.rollback()
    request.join()
    assert answer == [503] and waited < 10
    assert PostgresStore(conn).get(job).status == "queued"


# Identity --------------------------------------------------------------------------------


def aliases(owner: UUID) -> list[str]:
    """Other spellings of one uuid, which must each be a caller of their own."""
    text = str(owner)
    return [f"urn:uuid:{text}", f"{{{text}}}", text.upper(), owner.hex]


def test_other_spellings_of_a_callers_uuid_are_other_callers(call: Api, function_env: None) -> None:
    alice = uuid4()
    _, job = call("POST", "/jobs", body={"type": "t"}, sub=alice)
    assert call("GET", f"/jobs/{job['id']}", sub=alice)[0] == 200
    for alias in aliases(alice):
        assert call("GET", f"/jobs/{job['id']}", sub=alias)[0] == 404, alias
        assert call("POST", f"/jobs/{job['id']}/cancel", sub=alias)[0] == 404, alias


def test_a_uuid_sub_of_another_issuer_is_not_the_owner_issuers_user(
    function_env: None, monkeypatch: pytest.MonkeyPatch, app_url: str, tasks: object
) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", app_url)
    monkeypatch.setenv("TICKQ_OWNER_ISSUER", "https://owners.example")
    alice = uuid4()

    def invoke(method: str, path: str, issuer: str, **options: Any) -> tuple[int, Any]:
        event = http_event(method, path, sub=alice, **options)
        event["requestContext"]["authorizer"]["jwt"]["claims"]["iss"] = issuer
        response = api.handler(event, FakeContext())
        return response["statusCode"], json.loads(response["body"])

    status, job = invoke("POST", "/jobs", "https://owners.example", body={"type": "t"})
    assert (status, job["user_id"]) == (202, str(alice))
    assert invoke("GET", f"/jobs/{job['id']}", "https://owners.example")[0] == 200
    assert invoke("GET", f"/jobs/{job['id']}", "https://other.example")[0] == 404
