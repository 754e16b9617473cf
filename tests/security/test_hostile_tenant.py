"""Another tenant's jobs complete while one tenant writes the worst rows it can.

The hostile tenant has the application login and its own user: every write it can make
goes through the application login's functions, so the worst it can do is the edge of each
bound. It enqueues jobs at every edge (the largest payload, the longest lease and backoff,
the most attempts, the highest priority, a chain of parents, a debounce a year long), sends
each the most signal bytes, publishes the largest events, tries every direct write (all
refused), and its handler fails with the longest error the engine keeps, quoting its input.
Ticks run meanwhile, and the other tenant's jobs all succeed within a few of them.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import psycopg
import psycopg.errors
import pytest

from queue_core import JobContext, PostgresStore, Registry, Runner
from queue_core.model import json_text, validation
from queue_core.model.job_batch import JobBatch
from tests.security.conftest import RoleConnect

BIG = "x" * (json_text.MAX_PAYLOAD_BYTES - 64)
EDGE = {
    "max_attempts": validation.MAX_ATTEMPTS_LIMIT,
    "priority": validation.INT32,
    "lease_seconds": validation.MAX_LEASE_SECONDS,
    "backoff": {"base": 86_400, "factor": 100, "max": 7 * 86_400, "jitter": 1},
}
DIRECT_WRITES = [
    "insert into tickq.jobs (type, user_id) values ('hostile', %(me)s)",
    "update tickq.jobs set run_after = '-infinity', backoff_base = 1e300",
    "insert into tickq.job_settlements (parent_id, status, root_id, root_status)"
    " select id, 'dead', id, 'dead' from tickq.jobs",
    "insert into tickq.job_signals (job_id, name, size, sent_at)"
    " select id, 'x', 0, now() from tickq.jobs",
    "delete from tickq.job_keys",
]


def tasks() -> Registry:
    registry = Registry()

    @registry.task("victim")
    def victim(job: JobContext) -> Any:
        return {"n": job.payload["n"]}

    @registry.task("hostile")
    def hostile(job: JobContext) -> Any:
        raise RuntimeError("refused: " + json.dumps(job.payload) * 4)

    return registry


def hostile_writes(app: psycopg.Connection, me: UUID) -> None:
    def scoped(statement: str, params: Any) -> Any:
        with app.transaction():
            app.execute("select set_config('tickq.user_id', %s, true)", (str(me),))
            return app.execute(statement, params).fetchall()

    requests: list[dict[str, Any]] = [
        {"type": "hostile", "payload": {"big": BIG}, "group": "g" * 90, **EDGE} for _ in range(4)
    ]
    requests += [{"type": "hostile", "after": [i], **EDGE} for i in range(4)]
    requests.append({"type": "hostile", "debounce": {"key": "k" * 255, "seconds": 366 * 86_400}})
    rows = scoped("select id from tickq.enqueue_many(%s::jsonb)", (json.dumps(requests),))
    for (job_id,) in rows[:4]:
        for n in range(4):
            scoped(
                "select tickq.signal(%s, %s, %s::jsonb)",
                (job_id, f"s{n}", json.dumps("y" * 16_000)),
            )
    for _ in range(5):
        scoped("select * from tickq.publish('big', %s::jsonb)", (json.dumps({"x": "z" * 199_000}),))
    for statement in DIRECT_WRITES:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            scoped(statement, {"me": me})


def test_other_tenants_jobs_complete_while_one_tenant_writes_the_worst_it_can(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    registry = tasks()
    victims = [
        result.id
        for result in PostgresStore(as_app(), user_id=bob).enqueue_many(
            [registry.spec("victim", {"n": n}, user_id=bob) for n in range(30)]
        )
    ]
    store = PostgresStore(conn)
    with Runner(store, registry, batch_size=5, concurrency=2) as runner:
        hostile_writes(as_app(), alice)  # between the victim's enqueue and its run
        for _ in range(20):
            runner.tick(max_batches=4)
            store.reclaim()
            done = conn.execute(
                "select count(*) from tickq.jobs where id = any(%s) and status = 'succeeded'",
                (victims,),
            ).fetchone()
            if done == (len(victims),):
                break
    statuses = dict(
        conn.execute(
            "select status, count(*) from tickq.jobs where user_id = %s group by status",
            (bob,),
        ).fetchall()
    )
    assert statuses == {"succeeded": len(victims)}
    # The hostile jobs ran and failed (or wait for their parents or debounce), each row
    # inside its bounds: every one reads back.
    hostile = conn.execute(
        "select status, count(*) from tickq.jobs where user_id = %s group by status", (alice,)
    ).fetchall()
    # Its four big jobs ran and wait a day to retry; their children wait for them; the
    # debounced job waits a year.
    assert dict(hostile) == {"retrying": 4, "waiting": 4, "queued": 1}
    for job in store.list_jobs(limit=50).jobs:
        store.get(job.id)
    errors = conn.execute(
        "select max(octet_length(error)) from tickq.jobs where user_id = %s", (alice,)
    ).fetchone()
    assert errors is not None and errors[0] is not None


def test_a_hostile_graph_enqueue_cannot_name_another_tenants_jobs(
    as_app: RoleConnect, conn: psycopg.Connection, alice: UUID, bob: UUID
) -> None:
    registry = tasks()
    bobs = PostgresStore(conn).enqueue(registry.spec("victim", {"n": 0}, user_id=bob)).id
    store = PostgresStore(as_app(), user_id=alice)
    with pytest.raises(validation.InvalidJob, match="not found"):
        store.enqueue_after(JobBatch.of([registry.spec("hostile", {}, user_id=alice)]), [(bobs,)])
    assert conn.execute("select count(*) from tickq.job_dependencies").fetchone() == (0,)
