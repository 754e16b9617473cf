"""Every Python enqueue path stores a job's timeout, with a lease that covers it, and every
read of a job gives it back."""

from __future__ import annotations

import psycopg

import queue_core
from queue_core import PostgresStore, Registry
from queue_core.model.jobs import TIMEOUT_LEASE_MARGIN


def test_each_enqueue_path_stores_the_timeout_and_its_lease(conn: psycopg.Connection) -> None:
    registry = Registry()
    registry.task("slow", timeout=4)(lambda job: None)
    store = PostgresStore(conn)
    lease = 4 + TIMEOUT_LEASE_MARGIN

    single = queue_core.enqueue(conn, "slow", using=registry)
    keyed = queue_core.enqueue(conn, "slow", using=registry, idempotency_key="k", timeout=2)
    gated = queue_core.enqueue(conn, "slow", using=registry, throttle={"key": "t", "seconds": 5})
    many = queue_core.enqueue_many(
        conn,
        [{"type": "slow"}, {"type": "slow", "timeout": 3, "lease_seconds": 99}],
        using=registry,
    )
    keyed_many = queue_core.enqueue_many(
        conn,
        [{"type": "slow", "idempotency_key": "a"}, {"type": "slow", "idempotency_key": "b"}],
        using=registry,
    )
    after = queue_core.enqueue(conn, "slow", using=registry, after=[single.id])

    assert single.job is not None and single.job.timeout_seconds == 4
    stored = {
        name: (store.get(result.id).timeout_seconds, store.get(result.id).lease_seconds)
        for name, result in [
            ("single", single),
            ("keyed", keyed),
            ("gated", gated),
            ("many 0", many[0]),
            ("many 1", many[1]),
            ("keyed many", keyed_many[1]),
            ("after", after),
        ]
    }
    assert stored == {
        "single": (4, lease),
        "keyed": (2, 2 + TIMEOUT_LEASE_MARGIN),
        "gated": (4, lease),
        "many 0": (4, lease),
        "many 1": (3, 99),
        "keyed many": (4, lease),
        "after": (4, lease),
    }
    (claimed,) = [job for job in store.claim(limit=10) if job.id == single.id]
    assert claimed.timeout_seconds == 4
    assert store.get(single.id).to_dict()["timeout_seconds"] == 4
