"""The guard as a property: whatever sequence of updates the application role sends to
one of its jobs, every row it can reach differs from the one before only as one of the
operations docs/threat-model.md lists, and a worker can still read it.

The operations are written out here, in Python, from the threat model's list; the guard
(queue_core/schema/functions/jobs_app_guard.sql) is judged against them, never against
itself. Updates are drawn from a pool of assignments to every column the application may
update, the harmful values among them (±infinity, the year 10000, a forged wait, an error).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import psycopg
import psycopg.errors
from hypothesis import given
from hypothesis import strategies as st

from queue_core import JobBatch, PostgresStore
from queue_core.model import validation
from tests.model.profiles import budget

LIVE = ("waiting", "queued", "running", "retrying")
WAIT = ("resumes", "wait_kind", "wait_name", "wait_until", "signals")
TIMES = ("run_after", "updated_at", "finished_at", "wait_until")
# Values each column may be set to; SQL text from this fixed pool only.
POOL: dict[str, list[str]] = {
    "status": ["'queued'", "'cancelled'", "'running'", "'succeeded'", "'dead'", "'waiting'"],
    "attempts": ["0", "1"],
    "run_after": [
        "now()",
        "'1970-01-01Z'",
        "'2030-01-01Z'",
        "'-infinity'",
        "'10000-01-01Z'",
        "now() + interval '400 days'",
    ],
    "updated_at": ["now()", "'infinity'"],
    "finished_at": ["null", "now()", "'-infinity'"],
    "cancel_requested": ["true", "false"],
    "resumes": ["null", "99"],
    "wait_kind": ["null", "'signal'", "'sleep'"],
    "wait_name": ["null", "'go'"],
    "wait_until": ["null", "'2030-01-01Z'"],
    "signals": [
        "null",
        "'{go}'",
        "'{x}'",
        "array_append(coalesce(signals, '{}'), 'go')",
        "array_append(coalesce(signals, '{}'), 'x')",
    ],
    "has_children": ["true", "false"],
    "error": ["null", "'forged'", "'parent 00000000-0000-0000-0000-000000000000 is dead'"],
}
STARTS = ("queued", "running", "cancelled", "dead", "waiting", "signal_wait")

# The operations as the engine's statements make them, so that an update is often one of
# them plus a column more: the combinations a walk past the guard is made of.
OPERATIONS: list[dict[str, str]] = [
    {"signals": "array_append(coalesce(signals, '{}'), 'go')"},
    {"signals": "array_append(coalesce(signals, '{}'), 'go')", "run_after": "'1970-01-01Z'"},
    {"status": "'cancelled'", "finished_at": "now()"},
    {"cancel_requested": "true"},
    {"status": "'queued'", "attempts": "0", "finished_at": "null", "run_after": "now()"},
    {"has_children": "true"},
    {
        "resumes": "null",
        "wait_kind": "null",
        "wait_name": "null",
        "wait_until": "null",
        "signals": "null",
    },
]


def _indexed(assignments: dict[str, str]) -> dict[str, int]:
    return {col: POOL[col].index(value) for col, value in assignments.items()}


any_update = st.dictionaries(
    st.sampled_from(sorted(POOL)), st.integers(0, 5), min_size=1, max_size=3
)
operation_and_more = st.builds(
    lambda op, extra: {**_indexed(op), **extra},
    st.sampled_from(OPERATIONS),
    st.dictionaries(st.sampled_from(sorted(POOL)), st.integers(0, 5), max_size=1),
)
updates = st.lists(st.one_of(any_update, operation_and_more), min_size=1, max_size=5)


def _time(value: Any) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def allowed(old: dict[str, Any], new: dict[str, Any], now: datetime) -> bool:
    """Whether old -> new is one of the threat model's application operations."""
    moved = {k for k in old if old[k] != new[k]}
    if not moved:
        return True
    signals_before, signals_after = old["signals"] or [], new["signals"] or []
    sent = signals_after[-1] if signals_after else None
    if (
        "signals" in moved
        and moved <= {"signals", "run_after", "updated_at"}
        and old["status"] in LIVE
        and sent is not None
        and sent not in signals_before
        and signals_after == [*signals_before, sent]
        and len(signals_after) <= 100
    ):
        if "run_after" not in moved:
            return True
        return (
            old["status"] in ("queued", "retrying")
            and (old["wait_kind"], old["wait_name"]) == ("signal", sent)
            and _time(new["run_after"]) < _time(old["run_after"])  # type: ignore[operator]
        )
    if moved <= set(WAIT) and old["status"] in ("dead", "cancelled"):
        return all(new[k] is None for k in WAIT)
    if (
        moved <= {"status", "finished_at", "updated_at", "cancel_requested"}
        and new["status"] == "cancelled"
        and old["status"] in ("queued", "retrying", "waiting")
    ):
        return not new["cancel_requested"] and new["finished_at"] is not None
    if moved <= {"cancel_requested", "updated_at"} and old["status"] == "running":
        return bool(new["cancel_requested"])
    if (
        moved
        <= {"status", "attempts", "run_after", "cancel_requested", "finished_at", "updated_at"}
        and old["status"] in ("dead", "cancelled")
        and new["status"] == "queued"
    ):
        return (
            new["attempts"] == 0
            and not new["cancel_requested"]
            and new["finished_at"] is None
            and _time(new["run_after"]) <= now + timedelta(days=366)  # type: ignore[operator]
        )
    return moved == {"has_children"} and bool(new["has_children"])


def start(owner: psycopg.Connection, user: UUID, kind: str) -> UUID:
    """A job of `user` in one of the states the application meets, made by a worker."""
    store = PostgresStore(owner)
    spec = validation.job_spec("t", user_id=user)
    if kind == "waiting":
        parent = store.enqueue(spec).id
        return store.enqueue_after(JobBatch.of([spec]), [(parent,)])[0].id
    job = store.enqueue(spec).id
    if kind == "running":
        store.claim()
    elif kind in ("cancelled", "dead"):
        store.cancel(job)
        owner.execute("update tickq.jobs set status = %s where id = %s", (kind, job))
    elif kind == "signal_wait":
        owner.execute(
            "update tickq.jobs set wait_kind = 'signal', wait_name = 'go', resumes = 1,"
            " run_after = '2030-01-01Z' where id = %s",
            (job,),
        )
    return job


def row(owner: psycopg.Connection, job: UUID) -> dict[str, Any]:
    """The job as JSON values, and proof that a worker reads it (a time it could not read
    raises in the driver)."""
    owner.execute("select * from tickq.jobs where id = %s", (job,)).fetchall()
    found = owner.execute("select to_jsonb(j) from tickq.jobs j where j.id = %s", (job,))
    value = found.fetchone()
    assert value is not None
    data: dict[str, Any] = value[0] if isinstance(value[0], dict) else json.loads(value[0])
    return data


@budget(ci=100, long=1000)
@given(kind=st.sampled_from(STARTS), sequence=updates)
def test_every_row_the_application_reaches_is_one_the_threat_model_allows(
    database_url: str, app_login_url: str, kind: str, sequence: list[dict[str, int]]
) -> None:
    user = uuid4()
    with (
        psycopg.connect(database_url, autocommit=True) as owner,
        psycopg.connect(app_login_url, autocommit=True) as app,
    ):
        owner.execute("truncate tickq.jobs")
        job = start(owner, user, kind)
        before = row(owner, job)
        for update in sequence:
            assignments = ", ".join(
                f"{col} = {POOL[col][i % len(POOL[col])]}" for col, i in update.items()
            )
            try:
                with app.transaction():
                    app.execute("select set_config('tickq.user_id', %s, true)", (str(user),))
                    app.execute(f"update tickq.jobs set {assignments} where id = %s", (job,))
            except (
                psycopg.errors.InsufficientPrivilege,
                psycopg.errors.RaiseException,
                psycopg.errors.CheckViolation,
                psycopg.DataError,
                psycopg.IntegrityError,
            ):
                assert row(owner, job) == before, assignments
                continue
            except psycopg.Error as exc:
                assert exc.sqlstate == "TQ422", (assignments, exc)
                assert row(owner, job) == before, assignments
                continue
            after = row(owner, job)
            now = datetime.now(UTC)
            assert allowed(before, after, now), (assignments, before, after)
            before = after
