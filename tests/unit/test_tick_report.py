"""TickReport: the record a tick returns, summed across ticks and shown as JSON."""

from __future__ import annotations

import json
from uuid import uuid4

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
        {"id": str(letter.id), "type": "embed", "queue": "default", "attempts": 3, "error": "boom"}
    ]
