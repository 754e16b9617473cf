"""The outbox on real PostgreSQL: every path to dead writes one `Job Dead` event in the same
transaction, opted-in lifecycle events ride on the finish, applications publish their own
inside their transaction, and the publisher sends in order per job, retries with backoff,
leaves refused events pending and marks an event published only once."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from queue_core import InvalidJob, PermanentError, Registry, Runner, enqueue, publish
from queue_core.policies.outbox import LOCK_KEY, Event, Outbox, publish_pending
from queue_core.postgres import PostgresStore

INSTANT = {"base": 0.001, "max": 0.001}


def outbox(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute(
        "select job_id, detail_type, detail ->> 'error', published_at is not null"
        " from tickq.outbox order by id"
    ).fetchall()


def drain(store: PostgresStore, tasks: Registry) -> None:
    with Runner(store, tasks, batch_size=10, concurrency=1) as runner:
        for _ in range(50):
            runner.tick()
            if not any(
                row.count for row in store.stats() if row.status.value in ("queued", "retrying")
            ):
                return


def test_every_path_to_dead_writes_exactly_one_job_dead_event(conn: psycopg.Connection) -> None:
    tasks = Registry()

    @tasks.task("broken")
    def broken(job: Any) -> None:
        raise PermanentError("bad input")

    @tasks.task("flaky", max_attempts=2, backoff=INSTANT)
    def flaky(job: Any) -> None:
        raise RuntimeError("down")

    @tasks.task("ok")
    def ok(job: Any) -> None:
        return None

    store = PostgresStore(conn)
    permanent = enqueue(conn, "broken", using=tasks).id
    exhausted = enqueue(conn, "flaky", using=tasks).id
    fine = enqueue(conn, "ok", using=tasks).id
    # A parent that goes dead takes its waiting child with it (cancelled, no Job Dead).
    child = enqueue(conn, "ok", after=[permanent], using=tasks).id
    # A lease that expired at the last attempt: the reclaim makes it dead.
    earlier = store.now() - timedelta(minutes=5)
    expired = enqueue(conn, "ok", max_attempts=1, using=tasks, now=earlier).id
    assert len(store.claim(lease_seconds=1, now=earlier)) == 1

    drain(store, tasks)

    assert {j: store.get(j).status.value for j in (permanent, exhausted, fine, child, expired)} == {
        permanent: "dead",
        exhausted: "dead",
        fine: "succeeded",
        child: "cancelled",
        expired: "dead",
    }
    rows = outbox(conn)
    assert sorted((r[0], r[1]) for r in rows) == sorted(
        [(permanent, "Job Dead"), (exhausted, "Job Dead"), (expired, "Job Dead")]
    )
    errors = {r[0]: r[2] for r in rows}
    assert errors == {
        permanent: "PermanentError: bad input",
        exhausted: "RuntimeError: down",
        expired: "lease expired",
    }
    # Sent back and dead again: a second state change, a second event.
    store.retry(permanent)
    drain(store, tasks)
    assert [r[1] for r in outbox(conn) if r[0] == permanent] == ["Job Dead", "Job Dead"]


def test_a_rolled_back_death_leaves_no_event(conn: psycopg.Connection) -> None:
    tasks = Registry()
    job = enqueue(conn, "t", using=tasks).id
    with pytest.raises(psycopg.errors.RaiseException), conn.transaction():
        conn.execute("update tickq.jobs set status = 'dead' where id = %s", (job,))
        assert len(outbox(conn)) == 1  # written by the statement, in its transaction
        conn.execute("do $$ begin raise exception 'abort'; end $$")
    assert outbox(conn) == []


def test_opted_in_events_ride_on_the_finish_and_other_types_write_none(
    conn: psycopg.Connection,
) -> None:
    tasks = Registry()
    attempts: dict[str, int] = {}

    @tasks.task("noisy", max_attempts=3, backoff=INSTANT, events=["succeeded", "retrying"])
    def noisy(job: Any) -> str:
        attempts[str(job.id)] = attempts.get(str(job.id), 0) + 1
        if attempts[str(job.id)] < 2:
            raise RuntimeError("once")
        return "done"

    @tasks.task("quiet")
    def quiet(job: Any) -> None:
        return None

    store = PostgresStore(conn)
    loud = enqueue(conn, "noisy", using=tasks).id
    enqueue(conn, "quiet", using=tasks)
    drain(store, tasks)

    assert [(r[0], r[1]) for r in outbox(conn)] == [
        (loud, "Job Retrying"),
        (loud, "Job Succeeded"),
    ]
    detail = conn.execute("select detail from tickq.outbox order by id desc limit 1").fetchone()
    assert detail is not None
    assert detail[0] == {
        "id": str(loud),
        "type": "noisy",
        "queue": "default",
        "attempts": 2,
        "max_attempts": 3,
        "compensation_runs": 0,
        "error": None,
    }


def test_a_task_opts_only_into_known_events() -> None:
    with pytest.raises(InvalidJob, match="unknown event 'finished'"):
        Registry().task("t", events=["finished"])
    with pytest.raises(InvalidJob, match="list of event names"):
        Registry().task("t", events="succeeded")


def test_publish_is_part_of_the_callers_transaction(conn: psycopg.Connection) -> None:
    with pytest.raises(RuntimeError), conn.transaction():
        publish(conn, "Invoice Paid", {"invoice": 7})
        raise RuntimeError("the caller's own failure")
    assert outbox(conn) == []

    with conn.transaction():
        event_id = publish(conn, "Invoice Paid", {"invoice": 8})
    row = conn.execute("select event_id, source, detail_type, detail from tickq.outbox").fetchone()
    assert row == (event_id, "tickq.app", "Invoice Paid", {"invoice": 8})


@pytest.mark.parametrize(
    ("detail_type", "detail", "source", "field"),
    [
        ("", {}, "app", "detail_type"),
        ("x" * 129, {}, "app", "detail_type"),
        ("Paid", [1, 2], "app", "detail"),
        ("Paid", {"at": float("nan")}, "app", "detail"),
        ("Paid", {"blob": "x" * 200_001}, "app", "detail"),
        ("Job Dead", {}, "tickq", "source"),
    ],
)
def test_publish_refuses_bad_input_and_writes_nothing(
    conn: psycopg.Connection, detail_type: str, detail: Any, source: str, field: str
) -> None:
    with pytest.raises(InvalidJob) as refused:
        publish(conn, detail_type, detail, source=source)
    assert refused.value.field == field
    assert outbox(conn) == []


class Bus:
    """A bus that refuses a share of what it is sent (seeded), recording what it accepted."""

    def __init__(self, refuse: float, seed: int = 7) -> None:
        self.refuse = refuse
        self.rand = random.Random(seed)
        self.accepted: list[Event] = []
        self.calls = 0

    def __call__(self, events: Sequence[Event]) -> list[str | None]:
        self.calls += 1
        answers: list[str | None] = []
        for event in events:
            if self.rand.random() < self.refuse:
                answers.append("ThrottlingException: slow down")
            else:
                answers.append(None)
                self.accepted.append(event)
        return answers


def seed_events(conn: psycopg.Connection, jobs: int, per_job: int) -> dict[UUID, list[str]]:
    """Events of `jobs` jobs, `per_job` each, interleaved; returns each job's, in order."""
    written: dict[UUID, list[str]] = {}
    ids = [
        row[0]
        for row in conn.execute("select gen_random_uuid() from generate_series(1, %s)", (jobs,))
    ]
    for step in range(per_job):
        for job in ids:
            name = f"step {step}"
            conn.execute(
                "insert into tickq.outbox (job_id, detail_type, detail)"
                " values (%s, 'Job Step', jsonb_build_object('step', %s::text))",
                (job, name),
            )
            written.setdefault(job, []).append(name)
    return written


def test_a_flaky_bus_delays_events_but_every_one_arrives_once_in_order_per_job(
    conn: psycopg.Connection,
) -> None:
    written = seed_events(conn, jobs=40, per_job=3)
    bus = Bus(refuse=0.3)
    pauses: list[float] = []
    runs = 0
    while Outbox(conn).backlog().pending and runs < 50:
        runs += 1
        publish_pending(conn, bus, sleep=pauses.append)

    assert Outbox(conn).backlog().pending == 0 and runs > 1
    ids = [e.event_id for e in bus.accepted]
    assert len(ids) == len(set(ids)) == 120
    arrived: dict[UUID, list[str]] = {}
    for event in bus.accepted:
        assert event.job_id is not None
        arrived.setdefault(event.job_id, []).append(event.detail["step"])
    assert arrived == written
    # Exponential backoff within a run: each retry waits twice the last, from 0.2 s.
    assert set(pauses) <= {0.2, 0.4, 0.8} and 0.4 in pauses


def test_a_refused_event_stays_pending_with_its_reason_and_holds_its_jobs_later_ones(
    conn: psycopg.Connection,
) -> None:
    seed_events(conn, jobs=2, per_job=2)
    bus = Bus(refuse=1.0)

    report = publish_pending(conn, bus, sleep=lambda s: None)

    assert report.published == 0 and report.held == 2
    assert bus.calls == 4  # one call of the two jobs' first events, then three retries
    rows = conn.execute(
        "select detail ->> 'step', attempts, last_error, published_at from tickq.outbox order by id"
    ).fetchall()
    assert rows == [
        ("step 0", 4, "ThrottlingException: slow down", None),
        ("step 0", 4, "ThrottlingException: slow down", None),
        ("step 1", 0, None, None),
        ("step 1", 0, None, None),
    ]
    backlog = Outbox(conn).backlog()
    assert backlog.pending == 4 and backlog.most_attempts == 4


def test_a_send_that_raises_is_a_refusal_that_ends_the_run_and_so_does_time(
    conn: psycopg.Connection,
) -> None:
    seed_events(conn, jobs=30, per_job=1)

    def down(events: Sequence[Event]) -> list[str | None]:
        raise ConnectionError("no route to host")

    # A whole call refused: the bus is down, and the run ends rather than pay every call.
    report = publish_pending(conn, down, retries=0)
    assert report.held == 10 and report.published == 0 and report.stopped
    rows = conn.execute("select last_error, count(*) from tickq.outbox group by 1 order by 1")
    assert rows.fetchall() == [("ConnectionError: no route to host", 10), (None, 20)]

    bus = Bus(refuse=0.0)
    calls = iter([1.0, 0.0])
    stopped = publish_pending(conn, bus, time_left=lambda: next(calls))
    assert stopped.published == 10 and Outbox(conn).backlog().pending == 20


def test_one_publisher_at_a_time(conn: psycopg.Connection, connect: Any) -> None:
    seed_events(conn, jobs=3, per_job=1)
    other = connect()
    with other.transaction():
        other.execute("select pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        report = publish_pending(conn, Bus(refuse=0.0))
    assert report.busy and report.published == 0
    assert publish_pending(conn, Bus(refuse=0.0)).published == 3


def test_published_events_are_pruned_after_their_retention_and_pending_ones_stay(
    conn: psycopg.Connection,
) -> None:
    seed_events(conn, jobs=3, per_job=1)
    conn.execute("update tickq.outbox set published_at = now() - interval '8 days' where id = 1")
    conn.execute("update tickq.outbox set published_at = now() - interval '1 day' where id = 2")

    assert Outbox(conn).prune() == 1
    assert [r[0] for r in conn.execute("select id from tickq.outbox order by id")] == [2, 3]
    assert Outbox(conn).prune(max_age_seconds=3600) == 1
    assert Outbox(conn).backlog().pending == 1


def test_owners_share_the_calls_past_a_page_and_each_jobs_events_stay_in_order(
    conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Few events read per owner at a time, so owners known in part are read again.
    monkeypatch.setattr("queue_core.policies.outbox._HEADS", 30)
    flooder, small, late = UUID(int=1), UUID(int=2), UUID(int=3)
    written: dict[UUID, list[str]] = {}
    for owner, jobs in ((flooder, 60), (small, 6), (late, 4)):  # 210 events, owner by owner
        for job in range(jobs):
            job_id = UUID(int=owner.int << 64 | job)
            for step in range(3):
                conn.execute(
                    "insert into tickq.outbox (job_id, user_id, detail_type, detail)"
                    " values (%s, %s, 'Job Step', jsonb_build_object('step', %s::text))",
                    (job_id, owner, f"step {step}"),
                )
                written.setdefault(job_id, []).append(f"step {step}")
    bus = Bus(refuse=0.2)
    calls: list[list[Event]] = []

    def send(events: Sequence[Event]) -> list[str | None]:
        calls.append(list(events))
        return bus(events)

    runs = 0
    while Outbox(conn).backlog().pending and runs < 50:
        runs += 1
        publish_pending(conn, send, sleep=lambda s: None)

    assert Outbox(conn).backlog().pending == 0
    ids = [e.event_id for e in bus.accepted]
    assert len(ids) == len(set(ids)) == 210
    arrived: dict[UUID, list[str]] = {}
    for event in bus.accepted:
        assert event.job_id is not None
        arrived.setdefault(event.job_id, []).append(event.detail["step"])
    assert arrived == written
    # Written after the flooder's 180 events, the others' first went in the first call.
    assert {e.user_id for e in calls[0]} == {flooder, small, late}
