"""Fairness through `tickq`: --group on enqueue and schedules, caps per group in `limits`,
`stats --by group`; bad input is refused with exit 2 and writes nothing."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from queue_core.runner.registry import registry as process_registry
from tickq.infra.cli.program import main


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, database_url: str) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    monkeypatch.delenv("TICKQ_TASK_MODULES", raising=False)
    monkeypatch.delenv("TICKQ_QUEUES", raising=False)
    monkeypatch.setattr(process_registry, "tasks", {})


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    def run(*argv: str) -> tuple[int, Any, str]:
        capsys.readouterr()
        try:
            code = main([*argv, "--json"])
        except SystemExit as exc:  # argparse refuses a malformed option value itself
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        out = captured.out.strip()
        return code, json.loads(out) if out else None, captured.err + out

    return run


def test_enqueue_with_a_group_and_stats_by_group(cli, conn: psycopg.Connection) -> None:
    assert cli("enqueue", "acc", "--count", "3", "--group", "big")[0] == 0
    assert cli("enqueue", "acc", "--group", "small")[0] == 0
    code, rows, _ = cli("stats", "--by", "group")
    assert code == 0
    assert {(r["group"], r["waiting"], r["running"]) for r in rows} == {
        ("big", 3, 0),
        ("small", 1, 0),
    }


@pytest.mark.parametrize("group", ["", "two words", "-lead", "x" * 129])
def test_a_bad_group_is_a_usage_error_and_writes_nothing(cli, conn, group) -> None:
    code, _, said = cli("enqueue", "acc", f"--group={group}")
    assert code == 2 and "group" in said
    assert conn.execute("select count(*) from tickq.jobs").fetchone()[0] == 0


def test_caps_per_group_are_set_listed_and_cleared(cli, conn) -> None:
    code, data, _ = cli("limits", "set", "--type", "acc", "--max-running-per-group", "2")
    assert code == 0 and data["types"][0]["max_running_per_group"] == 2
    code, data, _ = cli(
        "limits", "set", "--queue", "bulk", "--max-running-per-group", "4", "--max-depth", "9"
    )
    assert code == 0
    assert data["queue_groups"][0]["max_running_per_group"] == 4
    assert data["queues"][0]["max_depth"] == 9
    code, data, _ = cli("limits", "list")
    assert [q["queue"] for q in data["queue_groups"]] == ["bulk"]
    assert cli("limits", "clear", "--queue", "bulk")[0] == 0
    code, data, _ = cli("limits", "list")
    assert data["queues"] == [] and data["queue_groups"] == []


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_a_bad_cap_per_group_is_a_usage_error(cli, conn, value) -> None:
    code, _, _ = cli("limits", "set", "--type", "acc", "--max-running-per-group", value)
    assert code == 2
    assert conn.execute("select count(*) from tickq.type_limits").fetchone()[0] == 0


def test_a_schedule_enqueues_into_its_group(cli, conn) -> None:
    code, data, _ = cli("schedules", "add", "tick", "* * * * *", "acc", "--group", "cron-jobs")
    assert code == 0 and data["group"] == "cron-jobs"
    code, report, _ = cli("schedules", "run", "--now", "2099-01-01T00:00:00+00:00")
    assert code == 0 and report["fired"] == 1
    assert conn.execute("select group_key from tickq.jobs").fetchone()[0] == "cron-jobs"


def test_a_cap_per_owner_is_set_beside_the_depth_and_listed(cli, conn) -> None:
    code, data, _ = cli("limits", "set", "--queue", "bulk", "--max-depth-per-owner", "3")
    assert code == 0
    assert (data["queues"][0]["max_depth"], data["queues"][0]["max_depth_per_owner"]) == (None, 3)
    code, data, _ = cli("limits", "set", "--queue", "bulk", "--max-depth", "9")
    assert (data["queues"][0]["max_depth"], data["queues"][0]["max_depth_per_owner"]) == (9, 3)
    code, data, _ = cli("limits", "list")
    assert [(q["queue"], q["max_depth_per_owner"]) for q in data["queues"]] == [("bulk", 3)]
    code, _, said = cli("limits", "set", "--type", "acc", "--max-depth-per-owner", "3")
    assert code == 2 and "per queue" in said
