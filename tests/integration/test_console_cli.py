"""`tickq queues` and `tickq maintain` against the test database: JSON output, exit codes,
and bad input refused with nothing changed."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from queue_core import PostgresStore
from queue_core.console.charts import QueueHistory
from queue_core.model.validation import job_spec
from queue_core.runner.registry import registry as process_registry
from tickq.infra.cli.program import main


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, database_url: str) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    monkeypatch.delenv("TICKQ_TASK_MODULES", raising=False)
    monkeypatch.setattr(process_registry, "tasks", {})


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    def run(*argv: str) -> tuple[int, Any, str]:
        capsys.readouterr()
        code = main(list(argv))
        captured = capsys.readouterr()
        out = captured.out.strip()
        return code, json.loads(out) if "--json" in argv and out else out, captured.err

    return run


def test_pause_list_resume(cli, conn: psycopg.Connection) -> None:
    PostgresStore(conn).enqueue(job_spec("embed", {}))

    code, paused, _ = cli(
        "queues", "pause", "default", "--by", "olivia", "--reason", "API down", "--json"
    )
    assert code == 0
    assert (paused["queue"], paused["paused_by"], paused["reason"]) == (
        "default",
        "olivia",
        "API down",
    )
    code, listed, _ = cli("queues", "list", "--json")
    assert [(q["queue"], q["depth"], q["paused"]) for q in listed] == [("default", 1, True)]
    code, stats, _ = cli("stats", "--json")
    assert [(r["queue"], r["paused"]) for r in stats] == [("default", True)]
    code, text, _ = cli("stats")
    assert "queue default is paused by olivia" in text

    code, resumed, _ = cli("queues", "resume", "default", "--json")
    assert (code, resumed["resumed"]) == (0, True)
    code, listed, _ = cli("queues", "list", "--json")
    assert listed[0]["paused"] is False


def test_resuming_a_queue_that_is_not_paused_is_refused(cli) -> None:
    code, _, err = cli("queues", "resume", "default")
    assert code == 1
    assert "not paused" in err


@pytest.mark.parametrize("queue", ["bad queue", "é", "a" * 129])
def test_a_bad_queue_name_is_bad_input_and_pauses_nothing(cli, conn, queue) -> None:
    code, _, err = cli("queues", "pause", queue)
    assert code == 2, err
    assert conn.execute("select count(*) from tickq.queue_pauses").fetchone() == (0,)


def test_maintain_samples_the_depth_of_every_queue(cli, conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    store.enqueue(job_spec("embed", {}))
    store.enqueue(job_spec("embed", {}, queue="bulk"))

    code, report, _ = cli("maintain", "--json")

    assert code == 0
    assert (report["reclaimed"], report["depth_samples"]) == (0, 2)
    samples = QueueHistory(conn).depth("hour")
    assert sorted((s.queue, s.depth) for s in samples) == [("bulk", 1), ("default", 1)]


def test_maintain_makes_the_missing_day_partitions(cli, conn: psycopg.Connection) -> None:
    today = conn.execute(
        "select tickq.jobs_partition_name((now() at time zone 'UTC')::date)"
    ).fetchone()[0]
    conn.execute("select tickq.jobs_partitions_ensure((now() at time zone 'UTC')::date, 0)")
    conn.execute("select * from tickq.jobs_partition_drop(%s)", (today,))

    code, report, _ = cli("maintain", "--json")

    assert code == 0 and report["partitions_created"] >= 1
    assert conn.execute("select to_regclass('tickq.' || %s) is not null", (today,)).fetchone() == (
        True,
    )
