"""A publisher process for the kill test: sends the outbox's pending events to a file (the
"bus": each event id written and synced means it was delivered), then hangs inside the send,
so the test can SIGKILL it after the bus took the events and before the outbox marked them.

Usage: python -m tests.faults.outbox_publisher DATABASE_URL BUS_FILE
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence

import psycopg

from queue_core.policies.outbox import Event, publish_pending


def main(url: str, bus_file: str) -> None:
    def send(events: Sequence[Event]) -> list[str | None]:
        with open(bus_file, "a", encoding="utf-8") as bus:
            for event in events:
                bus.write(f"{event.event_id}\n")
            bus.flush()
            os.fsync(bus.fileno())
        while True:  # delivered; the kill comes before the outbox hears of it
            time.sleep(60)

    with psycopg.connect(url, autocommit=True) as conn:
        publish_pending(conn, send)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
