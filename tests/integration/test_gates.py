"""Debounce and throttle on PostgreSQL: which job an enqueue of a key lands on, per owner,
through the Python store, enqueue_many and tickq.enqueue; refusals that write nothing; many
connections enqueueing one key at once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import psycopg
import pytest

import queue_core
from queue_core import Debounce, InvalidJob, PostgresStore, QueueFull, Status, Throttle
from queue_core.model.validation import job_spec
from queue_core.policies.limits import Limits, queue_limit
from tests.integration.test_dependency_races import blocked_on_locks, wait_until

Connect = Callable[[], psycopg.Connection]
T0 = datetime(2030, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def counts(conn: psycopg.Connection) -> tuple[int, int]:
    """(jobs, gate rows)."""
    row = conn.execute(
        "select (select count(*) from tickq.jobs), (select count(*) from tickq.job_gates)"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_a_burst_of_debounced_enqueues_makes_one_job_with_the_last_payload(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    gate = Debounce("doc-1", 30, max_seconds=100)
    first = store.enqueue(job_spec("reindex", {"v": 1}, debounce=gate), now=at(0))
    second = store.enqueue(job_spec("reindex", {"v": 2}, debounce=gate), now=at(20))

    assert (first.debounced, second.debounced, second.duplicate) == (False, True, False)
    assert second.id == first.id
    assert second.job is not None
    assert (second.job.payload, second.job.run_after) == ({"v": 2}, at(50))
    # Past the bound: never later than the first enqueue + max_seconds.
    third = store.enqueue(job_spec("reindex", {"v": 3}, debounce=gate), now=at(90))
    assert third.job is not None and third.job.run_after == at(100)
    gate_view = store.gate_of(first.id)
    assert gate_view is not None
    assert (gate_view.enqueues, gate_view.summary) == (3, "debounced 2 times (key doc-1)")
    assert counts(conn) == (1, 1)


def test_a_debounced_job_that_started_is_left_alone_and_the_next_enqueue_makes_a_new_one(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    gate = Debounce("doc-1", 10)
    first = store.enqueue(job_spec("reindex", {"v": 1}, debounce=gate), now=at(0))
    (claimed,) = store.claim(now=at(10))
    later = store.enqueue(job_spec("reindex", {"v": 2}, debounce=gate), now=at(11))

    assert claimed.id == first.id and later.id != first.id and not later.debounced
    assert store.get(first.id).payload == {"v": 1}
    assert later.job is not None and later.job.run_after == at(21)


def test_a_throttle_makes_one_job_per_window_and_returns_it_as_a_duplicate(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    gate = Throttle("tenant-7", 60)
    first = store.enqueue(job_spec("sync", {"v": 1}, throttle=gate), now=at(0))
    inside = store.enqueue(job_spec("sync", {"v": 2}, throttle=gate), now=at(59.9))
    after = store.enqueue(job_spec("sync", {"v": 3}, throttle=gate), now=at(60))

    assert (first.duplicate, inside.duplicate, after.duplicate) == (False, True, False)
    assert inside.id == first.id and after.id != first.id
    assert store.get(first.id).payload == {"v": 1}  # a throttled enqueue changes nothing
    assert first.job is not None and first.job.run_after == at(0)
    view = store.gate_of(first.id)
    assert view is not None and view.summary == "throttled 1 time (key tenant-7)"


def test_keys_are_per_owner(conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    alice, bob = uuid4(), uuid4()
    for gate in (Debounce("k", 10), Throttle("k", 10)):
        ids = [
            store.enqueue(job_spec("t", user_id=owner, **{gate.kind: gate}), now=at(0)).id
            for owner in (alice, bob, None, alice)
        ]
        assert len(set(ids)) == 3 and ids[3] == ids[0]  # another owner's job is no gate's
    assert counts(conn) == (6, 6)


def test_enqueue_many_lands_a_batchs_repeats_of_a_key_on_its_first_job(
    conn: psycopg.Connection,
) -> None:
    requests = [
        {"type": "reindex", "payload": {"v": i}, "debounce": {"key": "d", "seconds": 5}}
        for i in range(3)
    ] + [{"type": "plain"}, {"type": "sync", "throttle": {"key": "s", "seconds": 5}}] * 2
    results = queue_core.enqueue_many(conn, requests, now=at(0))

    assert [r.debounced for r in results] == [False, True, True, False, False, False, False]
    assert [r.duplicate for r in results] == [False] * 6 + [True]
    assert len({results[0].id, results[1].id, results[2].id}) == 1
    assert results[6].id == results[4].id and results[5].id != results[3].id
    assert PostgresStore(conn).get(results[0].id).payload == {"v": 2}
    assert counts(conn) == (4, 2)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"debounce": Debounce("k", 5), "throttle": Throttle("k", 5)}, "throttle"),
        ({"debounce": Debounce("k", 5), "idempotency_key": "k"}, "debounce"),
        ({"throttle": Throttle("k", 5), "idempotency_key": "k"}, "throttle"),
        ({"debounce": Debounce("k", 5), "delay": 3}, "debounce"),
        ({"debounce": {"key": "k", "seconds": 5, "max_seconds": 4}}, "debounce.max_seconds"),
        ({"throttle": {"key": "k", "seconds": 0}}, "throttle.seconds"),
        ({"throttle": {"key": "k", "seconds": 5, "max_seconds": 9}}, "throttle"),
    ],
)
def test_combinations_that_mean_nothing_are_refused_and_write_nothing(
    conn: psycopg.Connection, options: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidJob) as refused:
        queue_core.enqueue(conn, "t", **options)
    assert refused.value.field == field
    assert counts(conn) == (0, 0)


def test_a_gate_with_after_is_refused_and_writes_nothing(conn: psycopg.Connection) -> None:
    parent = queue_core.enqueue(conn, "parent")
    with pytest.raises(InvalidJob) as refused:
        queue_core.enqueue(conn, "t", after=[parent.id], debounce=Debounce("k", 5))
    assert refused.value.field == "debounce"
    assert counts(conn) == (1, 0)


def sql_enqueue(conn: psycopg.Connection, arguments: str, *values: object) -> UUID:
    row = conn.execute(f"select tickq.enqueue('t', {arguments})", values).fetchone()
    assert row is not None
    return UUID(str(row[0]))


def test_tickq_enqueue_in_sql_debounces_and_throttles(conn: psycopg.Connection) -> None:
    debounce = "payload => %s, debounce_key => 'd', debounce_seconds => 30"
    first = sql_enqueue(conn, debounce, '{"v": 1}')
    second = sql_enqueue(conn, debounce, '{"v": 2}')
    throttle = "throttle_key => 's', throttle_seconds => 60"
    third, fourth = sql_enqueue(conn, throttle), sql_enqueue(conn, throttle)

    assert first == second and third == fourth and first != third
    job = PostgresStore(conn).get(first)
    assert job.payload == {"v": 2}
    assert job.run_after - job.updated_at == timedelta(seconds=30)  # the last enqueue's
    assert counts(conn) == (2, 2)


@pytest.mark.parametrize(
    ("arguments", "column"),
    [
        (
            "debounce_key => 'k', debounce_seconds => 5, throttle_key => 'k', "
            "throttle_seconds => 5",
            "throttle_key",
        ),
        ("debounce_key => 'k', debounce_seconds => 5, idempotency_key => 'k'", "debounce_key"),
        ("debounce_key => 'k', debounce_seconds => 5, run_after => now()", "debounce_key"),
        ("debounce_seconds => 5", "debounce_key"),
        ("debounce_key => 'k'", "debounce_seconds"),
        (
            "debounce_key => 'k', debounce_seconds => 5, debounce_max_seconds => 1",
            "debounce_max_seconds",
        ),
        ("throttle_key => '', throttle_seconds => 5", "throttle_key"),
    ],
)
def test_tickq_enqueue_refuses_a_gate_that_means_nothing_and_writes_nothing(
    conn: psycopg.Connection, arguments: str, column: str
) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
        sql_enqueue(conn, arguments)
    assert refused.value.diag.column_name == column
    conn.rollback()
    assert counts(conn) == (0, 0)


def test_an_application_user_gates_only_its_own_key(
    app_login_url: str, conn: psycopg.Connection
) -> None:
    alice, bob = uuid4(), uuid4()
    ids = []
    with psycopg.connect(app_login_url, autocommit=True) as app:
        for user in (alice, bob, alice):
            ids.append(
                PostgresStore(app, user_id=user).enqueue(
                    job_spec("t", user_id=user, debounce=Debounce("k", 5))
                )
            )
        assert ids[0].id == ids[2].id != ids[1].id and ids[2].debounced
        assert PostgresStore(app, user_id=bob).gate_of(ids[0].id) is None
        assert PostgresStore(app, user_id=alice).gate_of(ids[0].id) is not None


def test_a_full_queue_refuses_a_new_gated_job_but_not_one_landing_on_the_keys_job(
    conn: psycopg.Connection,
) -> None:
    first = PostgresStore(conn).enqueue(job_spec("t", debounce=Debounce("a", 5)))
    Limits(conn).set_queue(queue_limit("default", max_depth=1))
    store = PostgresStore(conn)  # its look at the limit tables sees the new limit
    again = store.enqueue(job_spec("t", debounce=Debounce("a", 5)))
    with pytest.raises(QueueFull):
        store.enqueue(job_spec("t", debounce=Debounce("b", 5)))
    assert again.debounced and again.id == first.id
    assert counts(conn) == (1, 1)


def test_a_deleted_job_takes_its_gate_row_with_it(conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    kept = store.enqueue(job_spec("t", debounce=Debounce("a", 5)))
    gone = store.enqueue(job_spec("t", throttle=Throttle("b", 5)))
    conn.execute("delete from tickq.jobs where id = %s", (gone.id,))
    assert (store.gate_of(kept.id) is not None, store.gate_of(gone.id)) == (True, None)
    conn.execute("truncate tickq.jobs")
    assert counts(conn) == (0, 0)


def test_a_debounce_waits_for_a_claim_holding_its_job_then_makes_a_new_one(
    connect: Connect, conn: psycopg.Connection
) -> None:
    """The claim locks the job and starts it; the debounce waits for the lock, then sees the
    job running, and leaves it (and its payload) alone."""
    store = PostgresStore(conn)
    gate = Debounce("doc", 5)
    first = store.enqueue(job_spec("t", {"v": 1}, debounce=gate), now=at(0))
    with connect() as claimer:
        claimer.autocommit = False
        claimer.execute(
            "update tickq.jobs set status = 'running', attempts = 1, started_at = now(),"
            " lease_until = now() + interval '1 minute', lease_token = gen_random_uuid()"
            " where id = %s",
            (first.id,),
        )  # held uncommitted, as a claim's transaction holds its jobs
        answer: list[queue_core.EnqueueResult] = []

        def enqueue() -> None:
            with connect() as own:
                own.autocommit = True
                answer.append(PostgresStore(own).enqueue(job_spec("t", {"v": 2}, debounce=gate)))

        thread = threading.Thread(target=enqueue)
        thread.start()
        wait_until(lambda: blocked_on_locks(conn) == 1, "the debounce waits for the claim")
        claimer.commit()
        thread.join(30)
    (later,) = answer
    assert later.id != first.id and not later.debounced
    assert store.get(first.id).payload == {"v": 1}
    assert counts(conn) == (2, 2)


@pytest.mark.parametrize("via", ["store", "sql"])
@pytest.mark.parametrize("kind", ["debounce", "throttle"])
def test_many_connections_enqueueing_one_key_at_once_make_one_job(
    connect: Connect, conn: psycopg.Connection, kind: str, via: str
) -> None:
    """Twelve connections enqueue the key at once (the Python store's enqueue, or
    tickq.enqueue in SQL), released together by a barrier: every enqueue lands on one job,
    and its count sees all of them."""
    workers = 12
    gate = Debounce("hot", 300) if kind == "debounce" else Throttle("hot", 300)
    ready = threading.Barrier(workers)
    ids: list[UUID] = []
    made: list[bool] = []  # the store's answers: whether each made the job
    errors: list[BaseException] = []
    lock = threading.Lock()

    def enqueue(index: int) -> None:
        try:
            with connect() as own:
                own.autocommit = True
                store = PostgresStore(own)
                ready.wait()
                if via == "sql":
                    job_id = sql_enqueue(
                        own,
                        f"{kind}_key => 'hot', {kind}_seconds => 300, payload => %s",
                        f'{{"n": {index}}}',
                    )
                    with lock:
                        ids.append(job_id)
                    return
                result = store.enqueue(job_spec("t", {"n": index}, **{kind: gate}))
                with lock:
                    ids.append(result.id)
                    made.append(not (result.debounced or result.duplicate))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=enqueue, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert errors == []
    assert len(ids) == workers and len(set(ids)) == 1
    assert via == "sql" or made.count(True) == 1
    assert counts(conn) == (1, 1)
    view = PostgresStore(conn).gate_of(ids[0])
    assert view is not None and view.enqueues == workers
    assert PostgresStore(conn).get(ids[0]).status is Status.QUEUED
