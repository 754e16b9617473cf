"""A keyed enqueue that loses its key gets the holder from a second statement.

jobs_enqueue and jobs_enqueue_one only claim keys and insert; a request whose key is held
comes back without a job, and the store reads the holder (jobs_key_holders,
jobs_key_holder). These tests pin what a caller gets in every case a key can be in, in one
batch and one by one, and that the insert statements no longer read tickq.jobs at all:
a join into every partition of it cost each keyed enqueue, duplicate or not.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest

from queue_core import EnqueueResult, PostgresStore, Status
from queue_core.model.ids import new_ids
from queue_core.model.validation import job_spec
from queue_core.postgres.enqueue import _one_job_params
from queue_core.postgres.statements import QUERIES

ALICE, BOB = uuid4(), uuid4()


def holders_of_every_kind(store: PostgresStore) -> dict[str, EnqueueResult]:
    """Alice's keys "live" (queued), "running", "succeeded" held, "dead" and "cancelled"
    freed; "shared" held by Alice and by Bob."""
    held = {
        name: store.enqueue(job_spec("embed", idempotency_key=name, user_id=ALICE, max_attempts=1))
        for name in ("cancelled", "running", "succeeded", "dead")
    }
    store.cancel(held["cancelled"].id)  # before it runs: a running job's cancel is a request
    for job in store.claim(limit=10):
        if job.id == held["succeeded"].id:
            store.complete(job, None)
        elif job.id == held["dead"].id:
            store.fail(job, "boom")
    held["live"] = store.enqueue(job_spec("embed", idempotency_key="live", user_id=ALICE))
    # One key held by two owners, each its own job: a lookup must tell them apart.
    held["bob's shared"] = store.enqueue(job_spec("embed", idempotency_key="shared", user_id=BOB))
    held["shared"] = store.enqueue(job_spec("embed", idempotency_key="shared", user_id=ALICE))
    store.enqueue(job_spec("embed"))  # keyless, claimed by no one
    return held


def expected(held: dict[str, EnqueueResult], key: str, owner: UUID | None) -> Any:
    """(holder id or None for a new job, duplicate, status) for a request of key/owner."""
    if owner == ALICE and key in ("live", "running", "succeeded", "shared"):
        status = {"running": Status.RUNNING, "succeeded": Status.SUCCEEDED}.get(key, Status.QUEUED)
        return (held[key].id, True, status)
    if owner == BOB and key == "shared":
        return (held["bob's shared"].id, True, Status.QUEUED)
    return (None, False, Status.QUEUED)


REQUESTS = [
    (key, owner)
    for key in ("live", "running", "succeeded", "dead", "cancelled", "shared", "new")
    for owner in (ALICE, BOB, None)
] + [(None, ALICE)]


def outcome(held: dict[str, EnqueueResult], result: EnqueueResult) -> Any:
    known = {r.id for r in held.values()}
    return (result.id if result.id in known else None, result.duplicate, result.status)


def test_a_batch_gets_each_held_keys_holder_and_inserts_the_rest(conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    held = holders_of_every_kind(store)
    before = conn.execute("select count(*) from tickq.jobs").fetchone()

    results = store.enqueue_many(
        [job_spec("embed", idempotency_key=key, user_id=owner) for key, owner in REQUESTS]
    )

    assert [outcome(held, r) for r in results] == [expected(held, *r) for r in REQUESTS]
    new = sum(1 for r in results if not r.duplicate)
    after = conn.execute("select count(*) from tickq.jobs").fetchone()
    assert before is not None and after is not None and after[0] == before[0] + new
    for result in results:  # every result names a job that exists, with its status
        assert store.get(result.id).status == result.status


def test_single_enqueues_get_each_held_keys_holder_and_insert_the_rest(
    conn: psycopg.Connection,
) -> None:
    store = PostgresStore(conn)
    held = holders_of_every_kind(store)

    results = [
        store.enqueue(job_spec("embed", idempotency_key=key, user_id=owner))
        for key, owner in REQUESTS
    ]

    assert [outcome(held, r) for r in results] == [expected(held, *r) for r in REQUESTS]
    for result in results:  # the whole row comes back, the holder's for a duplicate
        assert result.job is not None and result.job.id == result.id
        assert result.job == store.get(result.id)


def relations(plan: Any) -> set[str]:
    """Every relation a JSON plan reads or writes, at any depth."""
    if isinstance(plan, dict):
        found = {plan["Relation Name"]} if "Relation Name" in plan else set()
        return found.union(*(relations(value) for value in plan.values()))
    if isinstance(plan, list):
        return set().union(*(relations(item) for item in plan))
    return set()


@pytest.mark.parametrize("statement", ["jobs_enqueue", "jobs_enqueue_one"])
def test_a_keyed_enqueue_reads_no_partition_of_finished_jobs(
    conn: psycopg.Connection, statement: str
) -> None:
    # Given a key already held, so the statement has a duplicate to resolve
    store = PostgresStore(conn)
    store.enqueue(job_spec("embed", idempotency_key="k"))
    if statement == "jobs_enqueue":
        spec = job_spec("embed", idempotency_key="k")
        params: dict[str, Any] = {"now": None, "each_id": new_ids(1)}
        for column in ("queue", "type", "user_id", "payload", "idempotency_key",
                       "max_attempts", "priority", "run_after", "delay", "lease_seconds",
                       "backoff_base", "backoff_factor", "backoff_max", "backoff_jitter",
                       "group_key", "timeout_seconds", "flow_keys"):  # fmt: skip
            params[f"each_{column}"] = None
            params[f"all_{column}"] = None
        one = _one_job_params(spec, None)
        params.update(all_queue=one["queue"], all_type=one["type"], all_payload=one["payload"],
                      all_idempotency_key="k", all_max_attempts=one["max_attempts"],
                      all_priority=one["priority"], all_delay=0.0,
                      all_lease_seconds=one["lease_seconds"], all_backoff_base=1.0,
                      all_backoff_factor=2.0, all_backoff_max=60.0, all_backoff_jitter=0.0,
                      all_group_key="", all_flow_keys="")  # fmt: skip
    else:
        params = _one_job_params(job_spec("embed", idempotency_key="k"), None)

    # When it runs (rolled back)
    with conn.transaction(force_rollback=True):
        (plan,) = conn.execute(
            f"explain (analyze, format json) {QUERIES[statement]}", params
        ).fetchone()  # type: ignore[misc]

    # Then it touched the key table and inserted into tickq.jobs, reading nothing else
    plan = plan if isinstance(plan, list) else json.loads(plan)
    assert relations(plan) == {"job_keys", "jobs"}, json.dumps(plan)[:2000]
