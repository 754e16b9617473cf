"""The event an outcome carries to its finish: the one rule the runner's finish and a
completion in a handler's transaction share."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from queue_core.errors import InvalidJob
from queue_core.model import transitions
from queue_core.model.events import event_statuses, with_opted_event
from queue_core.model.jobs import Status

from .factory import running_job


def test_an_opted_in_status_carries_its_event_with_the_jobs_detail() -> None:
    job = running_job()
    outcome = with_opted_event(
        event_statuses(["succeeded"]), job, transitions.succeeded(job, {"ok": 1})
    )

    assert outcome.event_json is not None
    assert json.loads(outcome.event_json) == {
        "user_id": None,
        "detail_type": "Job Succeeded",
        "detail": {
            "id": str(job.id),
            "type": job.type,
            "queue": job.queue,
            "attempts": job.attempts,
            "max_attempts": job.max_attempts,
            "compensation_runs": 0,
            "error": None,
        },
    }
    assert outcome.status == Status.SUCCEEDED
    assert outcome.result_json is not None and json.loads(outcome.result_json) == {"ok": 1}


def test_a_compensating_sagas_event_carries_the_counts_its_views_show() -> None:
    """Its second attempt of two failed, then it ran once to undo: 2 of the max_attempts 2
    declared and one compensation run, not 3 of the 12 its compensation raised it to."""
    job = replace(
        running_job(), attempts=3, max_attempts=12, declared_max_attempts=2, compensation_attempts=2
    )
    outcome = with_opted_event(
        event_statuses(["cancelled"]), job, transitions.cancelled_while_running(job)
    )

    assert outcome.event_json is not None
    detail = json.loads(outcome.event_json)["detail"]
    counts = {k: detail[k] for k in ("attempts", "max_attempts", "compensation_runs")}
    assert counts == {"attempts": 2, "max_attempts": 2, "compensation_runs": 1}


def test_an_outcome_of_another_status_is_left_as_it_is() -> None:
    """Nothing opted, or another status opted: the same outcome, so a plain success stays
    plain (sent compactly, no event for the finish to test)."""
    job = running_job()
    success = transitions.succeeded(job)
    failure = transitions.failed(job, "down")

    assert with_opted_event(frozenset(), job, success) is success
    assert with_opted_event(event_statuses(["retrying"]), job, success) is success
    assert with_opted_event(event_statuses(["succeeded"]), job, failure) is failure
    assert success.is_plain_success


def test_a_failure_carries_its_error_and_dead_is_never_opted() -> None:
    """`Job Dead` is the trigger's on every path: opting into "dead" adds nothing, so the
    finish never writes it a second time."""
    job = running_job()
    retrying = with_opted_event(
        event_statuses(["retrying", "dead"]), job, transitions.failed(job, "down")
    )
    dead = transitions.failed(job, "bad", permanent=True)

    assert retrying.event_json is not None
    assert json.loads(retrying.event_json)["detail"]["error"] == "down"
    assert event_statuses(["dead"]) == frozenset()
    assert with_opted_event(event_statuses(["dead"]), job, dead) is dead
    with pytest.raises(InvalidJob, match="unknown event"):
        event_statuses(["finished"])
