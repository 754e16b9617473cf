"""EventBridge's limits on one PutEvents call, enforced on the client (moto enforces none): a
call whose entries add up to more than 256 KB, or that holds more than 10 entries, is refused
whole with a ValidationException, as EventBridge refuses it. Against those limits the
publisher sizes its calls by the bytes EventBridge counts, sends an event too big for any
call in a reduced form (its full detail stays readable by its id), lets no tenant's backlog
hold another tenant's event back more than a call, and lets no entry the bus keeps refusing
hold back the others."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import boto3
import psycopg
import pytest
from botocore.awsrequest import AWSResponse

from queue_core import publish
from queue_core.policies.outbox import Outbox, publish_pending
from tickq.functions.aws import eventbridge_sender, session

CALL_BYTES = 256 * 1024
ENTRIES_PER_CALL = 10


def entry_size(entry: dict[str, Any]) -> int:
    """An entry's size as EventBridge counts it: the UTF-8 bytes of Source, DetailType and
    Detail, 14 bytes for a Time, and the bytes of each Resources ARN."""
    size = sum(len(entry.get(key, "").encode()) for key in ("Source", "DetailType", "Detail"))
    size += 14 if "Time" in entry else 0
    return size + sum(len(arn.encode()) for arn in entry.get("Resources", []))


class Bus:
    """PutEvents with EventBridge's limits: a call over them is answered as EventBridge
    answers it (HTTP 400, ValidationException) before it reaches moto. Entries whose detail
    holds `poison` are refused one by one (FailedEntryCount), the others accepted; calls
    without any go on to moto. Records every call as sent and the entries each had accepted."""

    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.took: list[list[dict[str, Any]]] = []  # per call, the entries accepted
        self.refused_whole: list[str] = []
        self.poison = ""

    def before(self, params: dict[str, Any], **_: Any) -> Any:
        entries = json.loads(params["body"])["Entries"]
        self.calls.append(entries)
        self.took.append([])
        if len(entries) > ENTRIES_PER_CALL:
            message = (
                "1 validation error detected: Value at 'entries' failed to satisfy"
                " constraint: Member must have length less than or equal to 10"
            )
        elif sum(map(entry_size, entries)) > CALL_BYTES:
            message = "Total size of the entries in the request is over the limit."
        elif self.poison and any(self.poison in e["Detail"] for e in entries):
            results = [
                {"ErrorCode": "InternalFailure", "ErrorMessage": "poisoned"}
                if self.poison in e["Detail"]
                else {"EventId": f"{len(self.calls)}-{i}"}
                for i, e in enumerate(entries)
            ]
            failed = sum("ErrorCode" in r for r in results)
            return AWSResponse("https://events", 200, {}, None), {
                "FailedEntryCount": failed,
                "Entries": results,
            }
        else:
            return None  # on to moto, which accepts every entry for an existing bus
        self.refused_whole.append(message)
        error = {"Error": {"Code": "ValidationException", "Message": message}}
        return AWSResponse("https://events", 400, {}, None), error

    def after(self, parsed: dict[str, Any], **_: Any) -> None:
        results = parsed.get("Entries") or []  # none when the call was refused whole
        sent = self.calls[-1] if results else []
        self.took[-1] = [e for e, r in zip(sent, results, strict=True) if r.get("EventId")]

    def details(self) -> list[dict[str, Any]]:
        """The details of every entry accepted, in the order sent."""
        return [json.loads(e["Detail"]) for call in self.took for e in call]

    def call_of(self, event_id: UUID) -> int | None:
        """The number (from 1) of the call in which `event_id` was accepted."""
        for n, call in enumerate(self.took, start=1):
            if any(json.loads(e["Detail"])["event_id"] == str(event_id) for e in call):
                return n
        return None


@pytest.fixture
def bus(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bus]:
    boto3.client("events").create_event_bus(Name="jobs")
    monkeypatch.setenv("TICKQ_EVENT_BUS", "jobs")
    limits = Bus()
    events = session().events
    events.register_first("before-call.events.PutEvents", limits.before)
    events.register("after-call.events.PutEvents", limits.after)
    yield limits


def run(conn: psycopg.Connection, **kwargs: Any) -> Any:
    """One publisher run, as a tick's, on the EventBridge sender (no pauses between retries)."""
    return publish_pending(conn, eventbridge_sender("jobs"), sleep=lambda s: None, **kwargs)


def dead_event(conn: psycopg.Connection, error: str, user_id: UUID | None = None) -> UUID:
    """A `Job Dead` event as the trigger writes it, with `error` (the job is not needed)."""
    row = conn.execute(
        "insert into tickq.outbox (job_id, user_id, detail_type, detail)"
        " values (gen_random_uuid(), %s, 'Job Dead', jsonb_build_object("
        "'id', gen_random_uuid(), 'type', 'import', 'queue', 'default', 'attempts', 1,"
        " 'error', %s::text)) returning event_id",
        (user_id, error),
    ).fetchone()
    assert row is not None
    return UUID(str(row[0]))


def pending(conn: psycopg.Connection) -> int:
    return Outbox(conn).backlog().pending


def test_events_of_60_kb_of_non_ascii_text_go_out_in_calls_under_256_kb(
    conn: psycopg.Connection, bus: Bus
) -> None:
    # 10,000 "é" are 20 KB in the outbox and 60 KB as sent ("\u00e9" each): one fits a
    # call, four fit, ten do not.
    ids = [dead_event(conn, f"bad input {n}: " + "é" * 10_000) for n in range(25)]

    report = run(conn)

    assert bus.refused_whole == [] and not report.stopped
    assert report.published == 25 and pending(conn) == 0
    assert all(sum(map(entry_size, call)) <= CALL_BYTES for call in bus.calls)
    assert max(len(call) for call in bus.calls) == 4  # as many as fit: no call is wasted
    sent = {d["event_id"]: d for d in bus.details()}
    assert set(sent) == {str(i) for i in ids}
    assert all(d["error"].endswith("é" * 10_000) and "truncated" not in d for d in sent.values())


def test_an_event_too_big_for_any_call_goes_out_reduced_and_the_rest_in_the_same_pass(
    conn: psycopg.Connection,
    bus: Bus,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    database_url: str,
) -> None:
    before = [publish(conn, "Invoice Paid", {"invoice": n}) for n in range(3)]
    # 66,000 CJK characters: 198 KB in the outbox, 396 KB as sent ("\u4e2d" each).
    summary = "中" * 66_000
    big = publish(conn, "Report Ready", {"report": 7, "title": "Q3", "summary": summary})
    after = [publish(conn, "Invoice Paid", {"invoice": n}) for n in range(3, 6)]
    full_size = (
        len(b"tickq.app")
        + len(b"Report Ready")
        + len(json.dumps({"report": 7, "title": "Q3", "summary": summary, "event_id": str(big)}))
    )
    assert full_size > CALL_BYTES

    report = run(conn)

    assert bus.refused_whole == [] and report.published == 7 and pending(conn) == 0
    assert report.reduced == 1
    sent = {d["event_id"]: d for d in bus.details()}
    assert set(sent) == {str(i) for i in [*before, big, *after]}
    # The reduced event: flagged, its size, its small fields; the big one left out.
    assert sent[str(big)] == {
        "truncated": True,
        "event_id": str(big),
        "job_id": None,
        "size": full_size,
        "report": 7,
        "title": "Q3",
    }
    assert all(sent[str(i)]["invoice"] == n for n, i in enumerate([*before, *after]))
    # Its full detail stays in the outbox, readable by its id.
    (stored,) = Outbox(conn).events(event_id=big)
    assert stored["detail"] == {"report": 7, "title": "Q3", "summary": summary}
    assert stored["published_at"] is not None

    from tickq.infra.cli.program import main

    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    capsys.readouterr()
    assert main(["events", "--event", str(big), "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)["events"]
    assert listed["event_id"] == str(big) and listed["detail"]["summary"] == summary


@pytest.mark.parametrize(
    ("flood_bytes", "other_bytes"),
    # Large: one of the flood's events fills a call, and the other tenant's does not fit
    # beside it; the next call is the other tenant's turn.
    [(190_000, 100_000), (100, 100)],
    ids=["large events", "small events"],
)
def test_a_tenants_backlog_holds_another_tenants_event_back_one_call_at_most(
    conn: psycopg.Connection, bus: Bus, flood_bytes: int, other_bytes: int
) -> None:
    flooder, other = UUID(int=1), UUID(int=2)
    # More events than the publisher reads at once, all older than the other tenant's one.
    for n in range(150):
        dead_event(conn, f"{n} " + "x" * flood_bytes, user_id=flooder)
    waiting = dead_event(conn, "quota exceeded " + "y" * other_bytes, user_id=other)

    report = run(conn, max_calls=2)

    assert bus.refused_whole == [] and report.published >= 2
    assert bus.call_of(waiting) in (1, 2)
    assert all(sum(map(entry_size, call)) <= CALL_BYTES for call in bus.calls)


def test_entries_the_bus_keeps_refusing_hold_back_no_other_event(
    conn: psycopg.Connection, bus: Bus
) -> None:
    bus.poison = "poison"
    # Ten events the bus refuses one by one, every time, older than the others.
    poisoned = [dead_event(conn, f"poison {n}") for n in range(10)]
    fine = [dead_event(conn, f"fine {n}") for n in range(15)]

    # The first run finds the ten refused together, as when the bus is down, and ends; the
    # next one sends the others first.
    first = run(conn)
    second = run(conn)

    assert first.published + second.published == 15
    assert {d["event_id"] for d in bus.details()} == {str(i) for i in fine}
    assert pending(conn) == 10
    rows = conn.execute(
        "select event_id, last_error from tickq.outbox where published_at is null"
    ).fetchall()
    assert {r[0] for r in rows} == set(poisoned)
    assert all("InternalFailure" in r[1] for r in rows)
