"""The pure rules of flow keys (queue_core.model.flow): what a key may hold, how templates fill,
which prefix governs a key, and which jobs the limits let start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from queue_core.errors import InvalidJob, LeaseLost
from queue_core.model import flow
from queue_core.model.jobs import Status
from queue_core.model.validation import job_spec
from queue_core.store.memory import MemoryStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def test_keys_are_kept_in_order_once_each() -> None:
    assert flow.keys(["b", "a", "b"]) == ("b", "a")
    assert flow.keys(None) == ()


def test_templates_fill_from_top_level_fields() -> None:
    assert flow.fill(["shop:{shop}", "acct:{id}"], {"shop": "acme", "id": 7}) == (
        "shop:acme",
        "acct:7",
    )
    with pytest.raises(InvalidJob, match="'shop'"):
        flow.fill(["shop:{shop}"], {"shop": {"nested": 1}})
    with pytest.raises(InvalidJob, match="flow key"):
        flow.fill(["shop:{shop}"], {"shop": "has space"})


def test_an_outside_callers_keys_go_under_its_owner() -> None:
    owner = uuid4()
    assert flow.owned(["shop:a"], owner) == (f"{owner}/shop:a",)


def test_the_longest_limited_prefix_governs() -> None:
    short, long_ = flow.FlowLimit("a:", 5), flow.FlowLimit("a:x", 1)
    assert flow.governing("a:xy", [short, long_]) is long_
    assert flow.governing("a:y", [short, long_]) is short
    assert flow.governing("b", [short, long_]) is None


def test_a_cap_counts_each_key_on_its_own() -> None:
    limits = [flow.FlowLimit("k:", max_running=1)]
    jobs = [(1, ["k:a"]), (2, ["k:a"]), (3, ["k:b"]), (4, [])]
    admitted = flow.admit(jobs, limits=limits, running={}, starts={}, holds={}, now=T0)
    assert admitted == [1, 3, 4]


def test_a_start_exactly_one_period_ago_is_out_of_the_window() -> None:
    limits = [flow.FlowLimit("k:", rate_limit=1, rate_period_seconds=10.0)]
    starts = {"k:a": [T0 - timedelta(seconds=10)]}
    jobs = [(1, ["k:a"])]
    assert flow.admit(jobs, limits=limits, running={}, starts=starts, holds={}, now=T0) == [1]
    just_inside = {"k:a": [T0 - timedelta(seconds=9.999)]}
    assert flow.admit(jobs, limits=limits, running={}, starts=just_inside, holds={}, now=T0) == []


def test_a_hold_lapses_at_its_end() -> None:
    jobs = [(1, ["k"])]
    holds = {"k": T0 + timedelta(seconds=5)}
    kw = {"limits": (), "running": {}, "starts": {}, "holds": holds}
    assert flow.admit(jobs, now=T0, **kw) == []
    assert flow.admit(jobs, now=T0 + timedelta(seconds=5), **kw) == [1]


@pytest.mark.parametrize(
    ("value", "says"),
    [(0, "0-86400"), (86_401, "0-86400"), (True, "0-86400"), ("5", "0-86400")],
)
def test_a_hold_lasts_at_most_a_day(value: object, says: str) -> None:
    with pytest.raises(InvalidJob, match=says):
        flow.hold_seconds(value)


def test_the_memory_store_keeps_a_held_keys_jobs_waiting() -> None:
    now = [T0]
    store = MemoryStore(clock=lambda: now[0])
    store.enqueue(job_spec("t", {}, flow_keys=["k"]))
    store.enqueue(job_spec("t", {}, flow_keys=["k"]))
    (job,) = store.claim(limit=1)
    assert job.lease_token is not None

    store.hold_flow(job.id, job.lease_token, "k", 30)

    assert store.claim(limit=10) == []
    now[0] = T0 + timedelta(seconds=30)
    assert [j.status for j in store.claim(limit=10)] == [Status.RUNNING]
    with pytest.raises(LeaseLost):
        store.hold_flow(job.id, uuid4(), "k", 5)
