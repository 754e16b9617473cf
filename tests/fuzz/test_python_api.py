"""The Python API under hostile input: a clear tickq error or a faithful write, never an
unhandled exception, and a refusal writes nothing."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
from hypothesis import event, given
from hypothesis import strategies as st

from queue_core import Registry, TickqError, enqueue
from queue_core.errors import InvalidJob, JobNotFound
from queue_core.model import transitions
from queue_core.model.jobs import DEFAULT_MAX_ATTEMPTS, Job, Status
from queue_core.model.validation import job_spec
from queue_core.postgres import PostgresStore
from tests.fuzz import strategies as bad
from tests.model.profiles import budget

T0 = datetime(2030, 1, 1, tzinfo=UTC)
OPTIONS = ("queue", "idempotency_key", "priority", "max_attempts", "delay", "user_id")


def snapshot(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute(
        "select id, status, attempts, run_after, updated_at from tickq.jobs order by id"
    ).fetchall()


def test_enqueue_refuses_bad_input_clearly_and_writes_the_rest_faithfully(
    conn: psycopg.Connection,
) -> None:
    reach: Counter[str] = Counter()

    @budget(ci=150, long=3000)
    @given(
        type_=bad.mostly(bad.valid_name, bad.any_field),
        payload=bad.mostly(bad.storable_payload, bad.payload),
        options=bad.mostly(
            bad.valid_options,
            st.builds(
                lambda valid, field, value: {**valid, field: value},
                bad.valid_options,
                st.sampled_from(OPTIONS),
                bad.any_field,
            ),
        ),
    )
    def example(type_: Any, payload: Any, options: dict[str, Any]) -> None:
        before = snapshot(conn)
        try:
            result = enqueue(conn, type_, payload, using=Registry(), **options)
        except InvalidJob as exc:
            reach["refused"] += 1
            event("refused")
            assert str(exc).startswith("invalid ") and exc.field and exc.reason
            assert snapshot(conn) == before
            return
        reach["duplicate" if result.duplicate else "written"] += 1
        event("duplicate" if result.duplicate else "written")
        if result.duplicate:
            return
        assert_written_faithfully(PostgresStore(conn).get(result.id), type_, payload, options)

    example()
    print("python-api enqueue fuzz reach:", dict(reach))
    assert reach["written"] >= sum(reach.values()) / 2, reach


def assert_written_faithfully(job: Job, type_: str, payload: Any, options: dict[str, Any]) -> None:
    """Every field the caller gave is stored as given; the rest (None too) take defaults."""

    def given_or(field: str, default: Any) -> Any:
        value = options.get(field)
        return default if value is None else value

    assert job.type == type_ and job.status == Status.QUEUED and job.attempts == 0
    assert job.payload == ({} if payload is None else payload)
    assert job.queue == given_or("queue", "default")
    assert job.idempotency_key == options.get("idempotency_key")
    assert job.priority == given_or("priority", 0)
    assert job.max_attempts == given_or("max_attempts", DEFAULT_MAX_ATTEMPTS)
    assert job.user_id == options.get("user_id")
    delay = job.run_after - job.created_at
    assert abs(delay.total_seconds() - given_or("delay", 0.0)) < 1e-3


TYPES = ("resize", "embed", "mail")
QUEUES = ("default", "media")
OWNERS = (UUID(int=1), UUID(int=2))
STATUSES = tuple(status.value for status in Status)


def populate(store: PostgresStore) -> None:
    """Jobs of every status, type, queue and owner, created over several instants (ties
    included), for the listing's filters and cursor to have something to get wrong."""
    for batch in range(8):
        specs = [
            job_spec(
                TYPES[(batch + i) % 3],
                {"i": i},
                queue=QUEUES[i % 2],
                user_id=OWNERS[i % 3] if i % 3 < 2 else None,
                max_attempts=1,
            )
            for i in range(7)
        ]
        store.enqueue_many(specs, now=T0 + timedelta(seconds=batch))
    for queue in QUEUES:
        claimed = store.claim(queues=[queue], limit=20, now=T0 + timedelta(seconds=9))
        store.finish(
            [transitions.succeeded(j) for j in claimed[:6]]
            + [transitions.failed(j, "boom") for j in claimed[6:12]],
            now=T0 + timedelta(seconds=10),
        )
    for row in store.list_jobs(statuses=["queued"], limit=5).jobs:
        store.cancel(row.id, now=T0 + timedelta(seconds=11))


def oracle(
    jobs: list[Job],
    statuses: list[str] | None,
    types: list[str] | None,
    queues: list[str] | None,
    user_id: UUID | None,
) -> list[UUID]:
    """The listing computed from the whole table: filters, then newest first."""
    kept = [
        j
        for j in jobs
        if (statuses is None or j.status.value in statuses)
        and (types is None or j.type in types)
        and (queues is None or j.queue in queues)
        and (user_id is None or j.user_id == user_id)
    ]
    return [j.id for j in sorted(kept, key=lambda j: (j.created_at, j.id), reverse=True)]


def some_of(values: tuple[Any, ...]) -> st.SearchStrategy[list[Any] | None]:
    # None (no filter) first: hypothesis favours the first choice, and every filter narrows.
    return st.one_of(st.none(), st.lists(st.sampled_from(values), min_size=1, max_size=3))


def test_listing_over_a_populated_table_matches_an_oracle_page_by_page(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    populate(store)
    everything = store.list_jobs(limit=100).jobs
    assert {j.status for j in everything} == {
        Status.QUEUED,
        Status.RUNNING,
        Status.SUCCEEDED,
        Status.DEAD,
        Status.CANCELLED,
    }
    before = snapshot(conn)
    reach: Counter[str] = Counter()

    @budget(ci=150, long=3000)
    @given(
        statuses=bad.mostly(some_of(STATUSES), st.lists(bad.nasty_text, max_size=3)),
        types=bad.mostly(some_of((*TYPES, "unknown")), st.lists(bad.nasty_text, max_size=3)),
        queues=bad.mostly(some_of((*QUEUES, "nowhere")), st.lists(bad.nasty_text, max_size=3)),
        user_id=bad.mostly(st.none(), st.sampled_from(OWNERS)),
        limit=bad.mostly(st.integers(1, 30), st.one_of(bad.odd_number, bad.wrong_type)),
    )
    def example(
        statuses: list[str] | None,
        types: list[str] | None,
        queues: list[str] | None,
        user_id: UUID | None,
        limit: Any,
    ) -> None:
        pages: list[UUID] = []
        cursor = None
        try:
            for _ in range(len(everything) + 1):  # a cursor that repeats a page must end
                page = store.list_jobs(
                    statuses=statuses,
                    types=types,
                    queues=queues,
                    user_id=user_id,
                    limit=limit,
                    cursor=cursor,
                )
                assert len(page.jobs) <= limit
                pages += [j.id for j in page.jobs]
                if page.next_cursor is None:
                    break
                assert len(page.jobs) == limit  # a cursor only after a full page
                cursor = page.next_cursor
            else:
                raise AssertionError(f"more pages than jobs: {pages[:60]}")
        except InvalidJob as exc:
            reach["refused"] += 1
            event("refused")
            assert exc.field and exc.reason
            return
        expected = oracle(everything, statuses, types, queues, user_id)
        assert pages == expected
        reach["listed" if expected else "listed (none match)"] += 1
        event("listed" if expected else "listed (none match)")

    example()
    print("listing fuzz reach:", dict(reach))
    assert snapshot(conn) == before
    assert reach["listed"] >= sum(reach.values()) / 3, reach


@budget(ci=100, long=2000)
@given(
    job_id=st.one_of(bad.nasty_text, bad.wrong_type),
    operation=st.sampled_from(["get", "cancel", "retry"]),
)
def test_operations_on_hostile_ids_say_not_found_and_change_nothing(
    conn: psycopg.Connection, job_id: Any, operation: str
) -> None:
    store = PostgresStore(conn)
    enqueue(conn, "victim", {"x": 1}, using=Registry())
    before = snapshot(conn)
    try:
        getattr(store, operation)(job_id)
    except JobNotFound as exc:
        assert "not found" in str(exc)
    except TickqError as exc:  # pragma: no cover - reported with its message
        raise AssertionError(f"unexpected refusal for {job_id!r}: {exc}") from exc
    else:
        raise AssertionError(f"{operation}({job_id!r}) found a job")
    assert snapshot(conn) == before
