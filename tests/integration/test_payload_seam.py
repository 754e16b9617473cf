"""Every payload passes through one encode/decode seam (queue_core/model/payloads.py).

The seam is swapped for one that seals each payload (the row keeps {"sealed": <text
reversed>}), as a payload store elsewhere or encryption at rest would: each enqueue path
(one job, a batch, a map's children, a schedule's occurrence) then stores the sealed form,
and every reader (the handler, the store's reads) sees the payload as it was given. A path
that encoded or decoded on its own would leave a plain payload in a row, or hand a
handler the sealed one.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

import queue_core
from queue_core import JobContext, PostgresStore, Registry, Runner
from queue_core.model import payloads
from queue_core.policies.schedules import Schedules


def seal(payload: Any, max_bytes: int = payloads.MAX_PAYLOAD_BYTES) -> str:
    text = payloads.json_object({} if payload is None else payload, "payload", max_bytes)
    return json.dumps({"sealed": text[::-1]})


def unseal(stored: Any) -> Any:
    value = json.loads(stored) if isinstance(stored, str) else stored
    return json.loads(value["sealed"][::-1])


@pytest.fixture
def sealed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(payloads, "encode", seal)
    monkeypatch.setattr(payloads, "decode", unseal)


def stored_payloads(conn: psycopg.Connection) -> dict[str, Any]:
    rows = conn.execute("select type, payload from tickq.jobs order by type, created_at")
    return {f"{type_}:{i}": payload for i, (type_, payload) in enumerate(rows)}


def test_every_enqueue_path_and_reader_goes_through_the_payload_seam(
    conn: psycopg.Connection, sealed: None
) -> None:
    registry = Registry()
    seen: list[tuple[str, Any]] = []

    @registry.task("parent")
    def parent(job: JobContext) -> Any:
        seen.append(("parent", job.payload))
        return job.map("kids", "child", [{"n": 1}, {"n": 2}])

    @registry.task("child")
    def child(job: JobContext) -> Any:
        seen.append(("child", job.payload))
        return job.payload["n"]

    @registry.task("plain")
    def plain(job: JobContext) -> None:
        seen.append(("plain", job.payload))

    store = PostgresStore(conn)
    one = queue_core.enqueue(conn, "plain", {"via": "enqueue", "é": "ü"}, using=registry)
    queue_core.enqueue_many(conn, [{"type": "plain", "payload": {"via": "many"}}], using=registry)
    queue_core.enqueue(conn, "parent", {"via": "parent"}, using=registry)
    schedules = Schedules(conn)
    schedules.add(
        "cron", "0 * * * *", "plain", {"via": "schedule"}, now=datetime(2020, 1, 1, tzinfo=UTC)
    )
    assert schedules.run(now=datetime(2020, 1, 1, 1, 0, 5, tzinfo=UTC)).fired == 1

    # Readers see the payload as given; the row holds the sealed form.
    assert store.get(one.id).payload == {"via": "enqueue", "é": "ü"}
    with Runner(store, registry, rand=lambda: 0.0) as runner:
        for _ in range(10):
            runner.tick()

    assert sorted(seen, key=repr) == sorted(
        [
            ("plain", {"via": "enqueue", "é": "ü"}),
            ("plain", {"via": "many"}),
            ("plain", {"via": "schedule"}),
            ("parent", {"via": "parent"}),
            ("parent", {"via": "parent"}),
            ("child", {"n": 1}),
            ("child", {"n": 2}),
        ],
        key=repr,
    )
    rows = stored_payloads(conn)
    assert len(rows) == 6
    assert all(set(payload) == {"sealed"} for payload in rows.values()), rows
    assert sorted(unseal(p)["n"] for k, p in rows.items() if k.startswith("child")) == [1, 2]
