"""Debounce and throttle through `tickq enqueue` and `tickq show`, and in the operator
console's job view."""

from __future__ import annotations

import psycopg
import pytest

from queue_core.console.jobs import OperatorConsole
from tests.integration.test_cli import Cli, cli, environment

__all__ = ["cli", "environment"]


def test_enqueue_debounce_lands_a_burst_on_one_job_and_show_says_so(
    cli: Cli, conn: psycopg.Connection
) -> None:
    code, first, _ = cli("enqueue", "reindex", "--debounce", "doc:1:30:300", "--json")
    assert code == 0 and first["debounced"] is False
    code, again, _ = cli(
        "enqueue", "reindex", "--debounce", "doc:1:30:300", "--payload", '{"v": 2}', "--json"
    )
    assert code == 0 and again["debounced"] is True and again["id"] == first["id"]

    code, shown, _ = cli("show", first["id"], "--json")
    assert code == 0 and shown["payload"] == {"v": 2}
    assert shown["gate"]["key"] == "doc:1"  # the numbers are the last fields
    assert shown["gate"]["summary"] == "debounced 1 time (key doc:1)"
    code, human, _ = cli("show", first["id"])
    assert "debounced 1 time" in human
    view = OperatorConsole(conn).job(first["id"])
    assert view["gate"]["summary"] == "debounced 1 time"  # the key is the user's own text


def test_enqueue_throttle_returns_the_windows_job_as_a_duplicate(cli: Cli) -> None:
    code, first, _ = cli("enqueue", "sync", "--throttle", "tenant-7:60", "--json")
    code, again, _ = cli("enqueue", "sync", "--throttle", "tenant-7:60")
    assert code == 0 and again.startswith(first["id"])
    assert "duplicate: its throttle's window holds it" in again


def test_a_malformed_or_conflicting_gate_is_refused_and_writes_nothing(
    cli: Cli, conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (
        ("--throttle", "tenant-7"),
        ("--debounce", "doc:x"),
        ("--debounce", "doc:5", "--key", "k"),
        ("--debounce", "doc:5:1"),
    ):
        try:
            code, _, err = cli("enqueue", "t", *argv)
        except SystemExit as exit_:  # argparse's own refusal of a malformed argument
            code, err = int(str(exit_.code)), capsys.readouterr().err
        assert code == 2, argv
        assert "debounce" in err or "throttle" in err
    row = conn.execute("select count(*) from tickq.jobs").fetchone()
    assert row == (0,)
