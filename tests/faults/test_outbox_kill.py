"""At least once, shown with a real process: a publisher SIGKILLed after the bus took its
events and before the outbox marked them published leaves them pending, and the next run
sends them again under the same event ids (consumers drop the repeat by that id)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import psycopg

from queue_core.policies.outbox import Event, Outbox, publish_pending

ROOT = Path(__file__).resolve().parents[2]


def wait_until(condition: object, what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_publisher_killed_between_sending_and_marking_resends_with_the_same_ids(
    conn: psycopg.Connection, database_url: str, tmp_path: Path
) -> None:
    conn.execute(
        "insert into tickq.outbox (job_id, detail_type, detail)"
        " select gen_random_uuid(), 'Job Dead', jsonb_build_object('n', n)"
        " from generate_series(1, 5) n"
    )
    bus = tmp_path / "bus"
    publisher = subprocess.Popen(
        [sys.executable, "-m", "tests.faults.outbox_publisher", database_url, str(bus)],
        cwd=ROOT,
    )
    try:
        wait_until(lambda: bus.exists() and len(bus.read_text().split()) == 5, "the send")
    finally:
        publisher.send_signal(signal.SIGKILL)
        publisher.wait(timeout=30)
    delivered = bus.read_text().split()

    # The server rolls the killed publisher's transaction back when it sees the socket
    # close: its lock goes, and nothing it did is marked.
    wait_until(
        lambda: (
            not conn.execute(
                "select count(*) from pg_locks where locktype = 'advisory'"
            ).fetchone()[0]
        ),  # type: ignore[index]
        "the killed publisher's lock to go",
    )
    assert Outbox(conn).backlog().pending == 5

    resent: list[str] = []

    def send(events: Sequence[Event]) -> list[str | None]:
        resent.extend(str(e.event_id) for e in events)
        return [None] * len(events)

    assert publish_pending(conn, send).published == 5
    assert resent == delivered  # the same ids, in the same order: at least once
    assert Outbox(conn).backlog().pending == 0
    assert publish_pending(conn, send).published == 0 and len(resent) == 5
