"""Fairness across groups: the claim takes turns across the groups of a priority
level, caps per group hold across workers, and a queue of one group keeps the plain claim."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from queue_core.errors import InvalidJob
from queue_core.model.validation import job_spec
from queue_core.policies.limits import Limits, queue_group_limit, type_limit
from queue_core.postgres import PostgresStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def enqueue(
    conn, group: str | None, n: int, *, type_: str = "acc", priority: int = 0, now=T0, user_id=None
) -> None:
    """n jobs of one group, runnable from just before `now` (None: the database clock)."""
    specs = [
        job_spec(type_, {"i": i}, group=group, priority=priority, user_id=user_id) for i in range(n)
    ]
    at = None if now is None else now - timedelta(seconds=1)
    PostgresStore(conn).enqueue_many(specs, now=at)


def groups_of(jobs) -> Counter[str]:
    return Counter(job.group_key for job in jobs)


def test_a_job_takes_its_group_else_its_owner_else_the_shared_group(conn):
    owner = uuid4()
    store = PostgresStore(conn)
    given = store.enqueue(job_spec("acc", group="tenant-1", user_id=owner)).job
    owned = store.enqueue(job_spec("acc", user_id=owner)).job
    shared = store.enqueue(job_spec("acc")).job
    batch = store.enqueue_many([job_spec("acc", group="tenant-2"), job_spec("acc")])
    assert (given.group_key, owned.group_key, shared.group_key) == ("tenant-1", str(owner), "")
    assert [store.get(r.id).group_key for r in batch] == ["tenant-2", ""]
    assert store.get(given.id).group_key == "tenant-1"


@pytest.mark.parametrize("group", ["", "has space", "x" * 129, 7, "-lead"])
def test_a_bad_group_is_refused_and_writes_nothing(conn, group):
    with pytest.raises(InvalidJob, match="group"):
        PostgresStore(conn).enqueue(job_spec("acc", group=group))
    assert conn.execute("select count(*) from tickq.jobs").fetchone()[0] == 0


def test_a_backlog_of_one_group_does_not_hold_back_another_groups_jobs(conn):
    enqueue(conn, "big", 3000, now=T0 - timedelta(hours=1))
    enqueue(conn, "small", 5)
    jobs = PostgresStore(conn).claim(limit=10, now=T0)
    assert groups_of(jobs) == {"big": 5, "small": 5}


def test_each_group_gives_its_oldest_jobs_first(conn):
    enqueue(conn, "a", 6)
    store = PostgresStore(conn)
    first = [job.payload["i"] for job in store.claim(limit=10, now=T0) if job.group_key == "a"]
    enqueue(conn, "b", 20, now=T0 + timedelta(seconds=5))
    later = store.claim(limit=4, now=T0 + timedelta(seconds=5))
    assert sorted(first) == [0, 1, 2, 3, 4, 5]
    assert groups_of(later) == {"b": 4}


def test_the_sweep_reaches_every_group_before_any_group_goes_again(conn):
    for g in range(30):
        enqueue(conn, f"g{g:02}", 3)
    store = PostgresStore(conn)
    seen: list[str] = []
    for _ in range(3):
        seen += [job.group_key for job in store.claim(limit=10, now=T0)]
    assert Counter(seen) == {f"g{g:02}": 1 for g in range(30)}


def test_priorities_still_come_first(conn):
    enqueue(conn, "big", 50, priority=0)
    enqueue(conn, "small", 3, priority=0)
    enqueue(conn, "urgent", 4, priority=5)
    jobs = PostgresStore(conn).claim(limit=6, now=T0)
    assert groups_of(jobs)["urgent"] == 4
    assert sum(groups_of(jobs).values()) == 6


def test_a_queue_of_one_group_keeps_the_plain_claim(conn):
    enqueue(conn, None, 20)
    store = PostgresStore(conn)
    assert not store._claims_fairly(["default"])
    enqueue(conn, "other", 1)
    assert PostgresStore(conn)._claims_fairly(["default"])


def test_a_cap_per_group_holds_back_only_that_group(conn):
    Limits(conn).set_type(type_limit("acc", max_running_per_group=2))
    enqueue(conn, "big", 100)
    enqueue(conn, "small", 1)
    enqueue(conn, "other", 10, type_="free")
    store = PostgresStore(conn)
    jobs = store.claim(limit=10, now=T0) + store.claim(limit=10, now=T0)
    counted = Counter((job.type, job.group_key) for job in jobs)
    assert counted[("acc", "big")] == 2
    assert counted[("acc", "small")] == 1
    assert counted[("free", "other")] == 10


def test_a_finished_job_frees_its_groups_slot(conn):
    Limits(conn).set_type(type_limit("acc", max_running_per_group=1))
    enqueue(conn, "a", 3)
    store = PostgresStore(conn)
    [job] = store.claim(limit=5, now=T0)
    assert store.claim(limit=5, now=T0) == []
    store.complete(job, None, now=T0)
    assert len(store.claim(limit=5, now=T0)) == 1


def test_a_queue_cap_per_group_counts_every_type_of_the_group(conn):
    Limits(conn).set_queue_group(queue_group_limit("default", max_running_per_group=3))
    enqueue(conn, "a", 5, type_="x")
    enqueue(conn, "a", 5, type_="y")
    enqueue(conn, "b", 5, type_="x")
    jobs = PostgresStore(conn).claim(limit=20, now=T0)
    assert groups_of(jobs) == {"a": 3, "b": 3}


def test_per_type_caps_still_hold_under_the_fair_claim(conn):
    Limits(conn).set_type(type_limit("acc", max_running=3))
    enqueue(conn, "a", 5)
    enqueue(conn, "b", 5)
    enqueue(conn, "c", 5, type_="free")
    jobs = PostgresStore(conn).claim(limit=20, now=T0)
    assert Counter(job.type for job in jobs) == {"acc": 3, "free": 5}


def test_caps_per_group_are_listed_changed_and_cleared(conn):
    limits = Limits(conn)
    limits.set_type(type_limit("acc", max_running_per_group=2))
    limits.set_queue_group(queue_group_limit("bulk", max_running_per_group=4))
    assert [t.max_running_per_group for t in limits.types()] == [2]
    assert [(q.queue, q.max_running_per_group) for q in limits.queue_groups()] == [("bulk", 4)]
    assert PostgresStore(conn).limits_configured().per_group
    limits.clear_type("acc")
    limits.clear_queue_group("bulk")
    assert not PostgresStore(conn).limits_configured().per_group


@pytest.mark.parametrize("value", [0, -1, "2", True, 10**7])
def test_a_bad_cap_per_group_is_refused(value):
    with pytest.raises(InvalidJob, match="max_running_per_group"):
        type_limit("acc", max_running_per_group=value)
    with pytest.raises(InvalidJob, match="max_running_per_group"):
        queue_group_limit("q", max_running_per_group=value)


def test_group_stats_show_waiting_running_and_the_oldest_wait(conn):
    enqueue(conn, "a", 3, now=T0 - timedelta(seconds=59))
    enqueue(conn, "b", 2)
    store = PostgresStore(conn)
    store.claim(limit=2, now=T0)
    stats = {g.group: g for g in store.group_stats(now=T0)}
    assert stats["a"].waiting + stats["b"].waiting == 3
    assert stats["a"].running + stats["b"].running == 2
    assert stats["a"].oldest_runnable_seconds == pytest.approx(60.0)


def busiest_group(connection) -> int:
    """The most jobs of type acc that one group runs right now."""
    row = connection.execute(
        "select coalesce(max(n), 0) from (select count(*) as n from tickq.jobs"
        " where status = 'running' and type = 'acc' group by group_key) g"
    ).fetchone()
    return int(row[0])


def claim_until_done(
    store: PostgresStore, batch: int, seen: list[int], errors: list[BaseException]
) -> None:
    """Claim, hold the jobs a moment (their handlers' work), complete; until all succeeded."""
    try:
        give_up = time.monotonic() + 60
        while time.monotonic() < give_up:
            jobs = store.claim(limit=batch)
            if not jobs:
                left = store.conn.execute(
                    "select count(*) from tickq.jobs where status <> 'succeeded'"
                ).fetchone()[0]
                if not left:
                    return
                time.sleep(0.002)
                continue
            seen.append(busiest_group(store.conn))
            time.sleep(0.01)
            for job in jobs:
                store.complete(job, None)
    except BaseException as exc:  # reported by the test, in its own thread
        errors.append(exc)


@pytest.mark.parametrize("groups", [3, 1])
def test_concurrent_claimers_never_run_more_than_the_cap_of_a_group(conn, connect, groups):
    """Sampled continuously from another connection, not only at the end. Claimers take
    batches of 1 to 4, so they reach past the rows another one has locked; one hot group
    makes them meet at the cap most often."""
    claimers = 8
    cap = 2
    Limits(conn).set_type(type_limit("acc", max_running_per_group=cap))
    for g in range(groups):
        enqueue(conn, f"g{g}", 60 // groups, now=None)
    stop = threading.Event()
    seen: list[int] = []
    errors: list[BaseException] = []

    def watch() -> None:
        monitor = connect()
        while not stop.is_set():
            seen.append(busiest_group(monitor))

    watcher = threading.Thread(target=watch)
    workers = [
        threading.Thread(
            target=claim_until_done, args=(PostgresStore(connect()), 1 + i % 4, seen, errors)
        )
        for i in range(claimers)
    ]
    watcher.start()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    stop.set()
    watcher.join()

    assert not errors
    done = conn.execute("select count(*) from tickq.jobs where status = 'succeeded'").fetchone()
    assert done[0] == 60
    assert len(seen) > 100
    assert max(seen) <= cap, f"a group ran {max(seen)} jobs at once, over its cap of {cap}"
    assert max(seen) == cap  # the cap was reached: the race was exercised
