"""Queue backpressure for application users without tickq.queue_admit: the insert's own
trigger admits or refuses, so the app role learns no other user's depth yet can never
overfill a queue, and the API's 429 names only the queue."""

from __future__ import annotations

import json
import threading
from uuid import UUID, uuid4

import psycopg
import pytest

from queue_core import PostgresStore, QueueFull
from queue_core.model.validation import job_spec
from queue_core.policies.limits import Limits, queue_limit
from tests.functions.conftest import FakeContext, http_event
from tests.security.conftest import RoleConnect
from tickq.functions import api


def count(conn: psycopg.Connection) -> int:
    row = conn.execute("select count(*) from tickq.jobs").fetchone()
    assert row is not None
    return int(row[0])


def test_the_app_role_cannot_call_queue_admit(as_app: RoleConnect) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        as_app().execute("select * from tickq.queue_admit(array['bulk'], array[1])")


def test_the_app_role_cannot_count_an_owners_jobs_through_the_maps_admission(
    as_app: RoleConnect, bob: UUID
) -> None:
    """tickq.queue_admit_owner counts any owner's live jobs and locks the limit row: the
    workers' alone, as tickq.queue_admit."""
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        as_app().execute("select * from tickq.queue_admit_owner('bulk', %s, 1)", (bob,))


def test_an_app_batch_that_would_overflow_is_refused_whole(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    Limits(conn).set_queue(queue_limit("bulk", max_depth=3))
    PostgresStore(as_app(), user_id=bob).enqueue(job_spec("t", queue="bulk", user_id=bob))
    alices = PostgresStore(as_app(), user_id=alice)

    with pytest.raises(QueueFull) as refused:
        alices.enqueue_many([job_spec("t", queue="bulk", user_id=alice) for _ in range(3)])

    assert (refused.value.queue, refused.value.limit) == ("bulk", 3)
    assert count(conn) == 1
    alices.enqueue_many([job_spec("t", queue="bulk", user_id=alice) for _ in range(2)])
    assert count(conn) == 3


def test_concurrent_app_enqueuers_never_overfill_a_queue(
    as_app: RoleConnect, conn: psycopg.Connection
) -> None:
    Limits(conn).set_queue(queue_limit("bulk", max_depth=15))
    refused: list[int] = []

    def enqueue_loop() -> None:
        user = uuid4()
        store = PostgresStore(as_app(), user_id=user)
        for _ in range(8):
            try:
                store.enqueue(job_spec("t", queue="bulk", user_id=user))
            except QueueFull:
                refused.append(1)

    threads = [threading.Thread(target=enqueue_loop) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert count(conn) == 15
    assert len(refused) == 4 * 8 - 15


def test_the_apis_429_does_not_state_every_users_depth(
    function_env: None,
    monkeypatch: pytest.MonkeyPatch,
    app_url: str,
    conn: psycopg.Connection,
    tasks: object,
) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", app_url)
    monkeypatch.setenv("TICKQ_QUEUES", "default,bulk")
    Limits(conn).set_queue(queue_limit("bulk", max_depth=2))
    PostgresStore(conn).enqueue_many([job_spec("t", queue="bulk") for _ in range(2)])

    event = http_event("POST", "/jobs", body={"type": "t", "queue": "bulk"}, sub=str(uuid4()))
    response = api.handler(event, FakeContext())

    body = json.loads(response["body"])
    assert (response["statusCode"], body["error"], body["queue"]) == (429, "QueueFull", "bulk")
    assert "2" not in body["message"] and "depth" not in body
    assert count(conn) == 2


def test_an_app_retry_into_a_full_queue_is_refused_like_an_enqueue(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID
) -> None:
    # A retried job moves from the finished partitions back into the live one, which the
    # admission trigger sees as the insert it is: a waiting job more in the queue.
    worker = PostgresStore(conn)
    worker.enqueue(job_spec("t", queue="bulk", user_id=alice, max_attempts=1))
    (job,) = worker.claim(queues=["bulk"])
    worker.fail(job, "boom")
    Limits(conn).set_queue(queue_limit("bulk", max_depth=1))
    worker.enqueue(job_spec("t", queue="bulk", user_id=alice))
    alices = PostgresStore(as_app(), user_id=alice)

    with pytest.raises(QueueFull):
        alices.retry(job.id)

    assert worker.get(job.id).status == "dead"
