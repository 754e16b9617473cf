"""Pure parts of the operator console: which queues a claim may take, depth per queue from
the stats rows, the filters' checks, and the worker's status line."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from queue_core.console.charts import depth_by_queue
from queue_core.console.jobs import ActionResult, JobFilter, job_ids
from queue_core.errors import InvalidJob
from queue_core.model.jobs import Status
from queue_core.model.paused_queues import PausedQueues, claimable
from queue_core.runner.runner import TickReport
from queue_core.store.port import StatsRow
from tickq.infra.cli.progress import RATE_WINDOW_SECONDS, WorkStatus


def test_without_paused_queues_the_claim_is_unchanged():
    assert claimable(["default", "bulk"], 10, frozenset()) == (["default", "bulk"], 10)


def test_a_paused_queue_is_left_out_of_the_claim():
    assert claimable(["default", "bulk"], 10, frozenset({"default"})) == (["bulk"], 10)


def test_with_every_queue_paused_the_claim_takes_nothing():
    assert claimable(["default"], 10, frozenset({"default"})) == (["default"], 0)


def test_the_paused_set_is_read_again_only_after_its_ttl():
    reads = []
    probe = PausedQueues(ttl_seconds=3600)

    def read():
        reads.append(1)
        return ["default"]

    assert probe.current(read) == {"default"}
    assert probe.current(read) == {"default"}
    assert len(reads) == 1
    probe.forget()
    probe.current(read)
    assert len(reads) == 2


def test_depth_by_queue_adds_waiting_jobs_and_keeps_the_oldest_age():
    rows = [
        StatsRow("default", "embed", Status.QUEUED, 3, 12.0),
        StatsRow("default", "embed", Status.RETRYING, 2, 40.0),
        StatsRow("default", "embed", Status.RUNNING, 1, None),
        StatsRow("default", "reindex", Status.DEAD, 5, None),
        StatsRow("bulk", "embed", Status.SUCCEEDED, 9, None),
    ]
    assert depth_by_queue(rows) == {"default": (5, 1, 40.0), "bulk": (0, 0, None)}


@pytest.mark.parametrize(
    "given",
    [
        {"statuses": ["deadish"]},
        {"types": ["bad type"]},
        {"queues": [""]},
        {"groups": ["a group"]},
        {"error": ""},
        {"error": "x" * 201},
        {"created_from": datetime(2030, 1, 1)},  # naive
        {
            "created_from": datetime(2030, 1, 2, tzinfo=UTC),
            "created_to": datetime(2030, 1, 1, tzinfo=UTC),
        },
    ],
)
def test_bad_filters_are_refused(given):
    with pytest.raises(InvalidJob):
        JobFilter.of(**given)


def test_an_empty_filter_matches_everything():
    assert JobFilter.of().params() == {
        "statuses": None,
        "types": None,
        "queues": None,
        "groups": None,
        "error": None,
        "created_from": None,
        "created_to": None,
    }


@pytest.mark.parametrize("ids", [[], "abc", ["not-a-uuid"], None])
def test_bulk_ids_must_be_a_list_of_uuids(ids):
    with pytest.raises(InvalidJob):
        job_ids(ids)


def test_bulk_ids_are_deduplicated_and_bounded():
    one = uuid4()
    assert job_ids([str(one), str(one)]) == [one]
    with pytest.raises(InvalidJob):
        job_ids([str(uuid4()) for _ in range(501)])


def test_an_action_result_says_whether_it_changed_the_job():
    assert ActionResult(uuid4(), "retried", "queued").changed
    assert not ActionResult(uuid4(), "not retryable", "queued").changed


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_status_line_shows_rate_running_and_failures():
    clock = FakeClock()
    status = WorkStatus(clock)
    clock.now += 2
    status.add(TickReport(claimed=12, succeeded=8, retried=1, dead=1))

    line = status.line()

    assert line.startswith("5.0 jobs/s  running 2  succeeded 8  failures 2 (1 retried, 1 dead)")


def test_the_rate_forgets_ticks_older_than_its_window():
    clock = FakeClock()
    status = WorkStatus(clock)
    clock.now += 1
    status.add(TickReport(claimed=10, succeeded=10))
    clock.now += RATE_WINDOW_SECONDS + 1

    assert status.rate() == 0.0
