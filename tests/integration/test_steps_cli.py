"""`tickq signal`, `tickq retry --fresh` and `tickq show` on durable steps, with bad input
refused by a clear message and exit code, writing nothing."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from queue_core import PostgresStore, Registry, StepStore
from queue_core.runner.registry import registry as process_registry
from tickq.infra.cli.common import EXIT_INPUT, EXIT_REFUSED
from tickq.infra.cli.program import main

UNKNOWN = "0190c0de-0000-7000-8000-0000000000ff"


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, database_url: str) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    monkeypatch.setattr(process_registry, "tasks", {})


def tickq(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    capsys.readouterr()
    code = main(["--json", *argv])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else None, captured.err


def signals(conn: psycopg.Connection) -> int:
    row = conn.execute("select count(*) from tickq.job_signals").fetchone()
    return int(row[0]) if row else 0


def test_signal_keeps_the_payload_for_the_job(
    conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = PostgresStore(conn).enqueue(Registry().spec("approval")).id

    code, sent, _ = tickq(capsys, "signal", str(job_id), "approve", "--payload", '{"ok": true}')

    assert code == 0 and sent == {"id": str(job_id), "signal": "approve", "woke": False}
    code, shown, _ = tickq(capsys, "show", str(job_id))
    assert [s["name"] for s in shown["signals"]] == ["approve"] and shown["resumes"] == 0


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (("signal", UNKNOWN, "approve"), EXIT_REFUSED, "not found"),
        (("signal", "not-a-uuid", "approve"), EXIT_REFUSED, "not found"),
        (("signal", "{job}", "approve", "--payload", "{bad"), EXIT_INPUT, "not valid JSON"),
        (("signal", "{job}", "", "--payload", "1"), EXIT_INPUT, "signal name"),
        (("signal", "{job}", "x", "--payload", '"' + "a" * 70_000 + '"'), EXIT_INPUT, "limit"),
        (("retry", "--dead", "--fresh"), EXIT_INPUT, "--fresh takes job ids"),
    ],
)
def test_bad_signal_and_retry_input_is_refused_and_writes_nothing(
    conn: psycopg.Connection,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    code: int,
    message: str,
) -> None:
    job_id = str(PostgresStore(conn).enqueue(Registry().spec("approval")).id)

    status, body, _ = tickq(capsys, *(job_id if a == "{job}" else a for a in argv))

    assert status == code and message in body["message"]
    assert signals(conn) == 0


def test_signal_to_a_finished_job_is_refused(
    conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    store = PostgresStore(conn)
    store.enqueue(Registry().spec("quick"))
    (claimed,) = store.claim()
    store.complete(claimed)

    status, body, _ = tickq(capsys, "signal", str(claimed.id), "approve")

    assert status == EXIT_REFUSED and "succeeded" in body["message"]
    assert signals(conn) == 0


def test_retry_fresh_forgets_the_steps_and_plain_retry_keeps_them(
    conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    store = PostgresStore(conn)
    store.enqueue(Registry().spec("long", max_attempts=1))
    (claimed,) = store.claim()
    assert claimed.lease_token is not None
    StepStore(store).complete(claimed.id, claimed.lease_token, "fetch", '"audio"')
    store.fail(claimed, "down")

    assert tickq(capsys, "retry", str(claimed.id))[0] == 0
    assert [s["name"] for s in tickq(capsys, "show", str(claimed.id))[1]["steps"]] == ["fetch"]
    store.cancel(claimed.id)
    assert tickq(capsys, "retry", "--fresh", str(claimed.id))[0] == 0
    assert tickq(capsys, "show", str(claimed.id))[1]["steps"] == []
