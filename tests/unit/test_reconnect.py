"""Reconnecting after a database failure: a short fixed interval, jittered, with a ceiling on
attempts per second; never a delay that grows while the database stays away."""

from __future__ import annotations

import random

import pytest

from queue_core import DatabaseError, Registry, Runner
from queue_core.runner import worker_rule as worker_module
from queue_core.store.memory import MemoryStore
from queue_core.store.port import Store


def test_attempts_come_at_a_fixed_jittered_interval_until_one_works() -> None:
    old, fresh = MemoryStore(), MemoryStore()
    runner = Runner(old, Registry(), rand=random.Random(7).random)
    pauses: list[float] = []
    failures = iter(range(40))

    def reconnect() -> Store:
        if next(failures, None) is not None:
            raise DatabaseError("database unavailable: connection refused")
        return fresh

    def wait(seconds: float) -> bool:
        pauses.append(seconds)
        return False

    assert worker_module.replace_store(runner, reconnect, DatabaseError("gone"), wait)

    assert runner.store is fresh
    assert len(pauses) == 41  # forty refusals, then the attempt that worked
    floor = 1 / worker_module.RECONNECTS_PER_SECOND
    assert all(floor <= p <= worker_module.RECONNECT_SECONDS * 1.2 for p in pauses)
    assert len({round(p, 6) for p in pauses}) > 1  # jittered, so workers do not knock in step


def test_a_stop_during_the_wait_ends_the_attempts_and_keeps_the_store() -> None:
    old = MemoryStore()
    runner = Runner(old, Registry())

    def reconnect() -> Store:
        raise AssertionError("no attempt after a stop")

    assert not worker_module.replace_store(runner, reconnect, DatabaseError("gone"), lambda s: True)
    assert runner.store is old


@pytest.mark.parametrize("rand", [0.0, 1.0])
def test_the_ceiling_holds_at_either_end_of_the_jitter(rand: float) -> None:
    runner = Runner(MemoryStore(), Registry(), rand=lambda: rand)
    pauses: list[float] = []
    worker_module.replace_store(
        runner, MemoryStore, DatabaseError("gone"), lambda s: pauses.append(s) or False
    )
    assert pauses and pauses[0] >= 1 / worker_module.RECONNECTS_PER_SECOND
