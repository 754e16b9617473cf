"""TickReport: the record a tick returns, summed across ticks and shown as JSON."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from uuid import uuid4

from queue_core.model.jobs import Job, Status
from queue_core.runner.report import DeadLetter, TickReport


def test_adding_reports_sums_every_counter_and_collects_dead_letters() -> None:
    letter = DeadLetter(uuid4(), "embed", "default", 3, "boom")
    total = TickReport(claimed=2, succeeded=1, retried=1, batches=1, duration_seconds=0.5)

    total.add(TickReport(claimed=3, dead=1, snoozed=2, batches=1, dead_letters=[letter]))

    assert (total.claimed, total.succeeded, total.retried, total.dead) == (5, 1, 1, 1)
    assert (total.snoozed, total.batches, total.duration_seconds) == (2, 2, 0.5)
    assert total.dead_letters == [letter]


def test_as_dict_is_json_ready_and_names_every_counter() -> None:
    letter = DeadLetter(uuid4(), "embed", "default", 3, "boom")
    report = TickReport(claimed=1, dead=1, dead_letters=[letter])

    data = json.loads(json.dumps(report.as_dict()))

    assert data["claimed"] == 1 and data["dead"] == 1 and data["lost_leases"] == 0
    assert data["dead_letters"] == [
        {
            "id": str(letter.id),
            "type": "embed",
            "queue": "default",
            "attempts": 3,
            "max_attempts": None,
            "compensation_runs": 0,
            "error": "boom",
        }
    ]


def test_a_dead_letter_counts_as_the_job_views_do() -> None:
    """A saga declared with 2 attempts whose compensation raised max_attempts to 12 and ran
    once: 2 of 2 and one compensation run, not 3 of 12."""
    now = datetime.now(UTC)
    job = Job(
        uuid4(), "default", "saga", None, Status.RUNNING, {}, None, 3, 12, 0, now, now,
        uuid4(), None, None, None, [], None, 1.0, 2.0, 60.0, 0.1, False, now, now, now, None,
        declared_max_attempts=2, compensation_attempts=2,
    )  # fmt: skip

    letter = DeadLetter.of(job, "undo failed")

    assert (letter.attempts, letter.max_attempts, letter.compensation_runs) == (2, 2, 1)
    plain = replace(job, attempts=3, max_attempts=3, declared_max_attempts=None,
                    compensation_attempts=None)  # fmt: skip
    assert DeadLetter.of(plain, "boom").as_dict()["attempts"] == 3
    assert DeadLetter.of(plain, "boom").as_dict()["max_attempts"] == 3
