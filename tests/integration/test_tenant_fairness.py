"""Turns across tenants, then across a tenant's groups (tickq.claim_fair): a tenant is a
group key up to its first '/', and its many groups share one turn."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg

from queue_core import PostgresStore
from queue_core.model.validation import job_spec

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def enqueue(store: PostgresStore, group: str, count: int, second: int = 0) -> None:
    now = T0 + timedelta(seconds=second)
    store.enqueue_many([job_spec("t", group=group) for _ in range(count)], now=now)


def groups(store: PostgresStore, limit: int) -> list[str]:
    return sorted(job.group_key for job in store.claim(limit=limit, now=T0 + timedelta(hours=1)))


def test_a_tenants_many_groups_share_one_turn(conn: psycopg.Connection) -> None:
    # Given tenant t's oldest jobs in eight groups, then one job each of tenants a and b,
    # and a worker whose sweep begins at t (a first sweep begins at a random point)
    store = PostgresStore(conn, groups_ttl_seconds=0, rand=lambda: 0.9)
    for n in range(8):
        enqueue(store, f"t/{n}", 3)
    enqueue(store, "a", 1, second=1)
    enqueue(store, "b", 1, second=1)

    # When a worker claims three
    claimed = groups(store, 3)

    # Then each tenant had one turn
    assert claimed[:2] == ["a", "b"] and claimed[2].startswith("t/")


def test_a_tenants_turns_go_round_its_groups(conn: psycopg.Connection) -> None:
    # Given tenant t's jobs in three groups, and tenant a's backlog
    store = PostgresStore(conn, groups_ttl_seconds=0)
    for n in range(3):
        enqueue(store, f"t/{n}", 5)
    enqueue(store, "a", 20)

    # When one worker claims two at a time, three times
    served = [groups(store, 2) for _ in range(3)]

    # Then each claim gave each tenant one job, and t's three turns went to its three groups
    assert all(claim[0] == "a" for claim in served)
    assert sorted(claim[1] for claim in served) == ["t/0", "t/1", "t/2"]
