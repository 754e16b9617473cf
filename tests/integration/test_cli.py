"""The `tickq` command line against the test database: JSON output, exit codes, and bad input
that is refused with a clear message and writes nothing."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from queue_core import PostgresStore, Status, publish
from queue_core.migrate import versions as migrate_versions
from queue_core.model.validation import job_spec
from queue_core.runner.registry import registry as process_registry
from tickq.infra.cli.program import main

UNKNOWN = "0190c0de-0000-7000-8000-0000000000ff"


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, database_url: str) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    monkeypatch.delenv("TICKQ_TASK_MODULES", raising=False)
    monkeypatch.delenv("TICKQ_QUEUES", raising=False)
    # The CLI uses the process-wide registry; other tests' modules may have filled it.
    monkeypatch.setattr(process_registry, "tasks", {})


class Cli:
    """Runs `tickq` in-process and parses what it printed."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, Any, str]:
        self.capsys.readouterr()
        code = main(list(argv))
        captured = self.capsys.readouterr()
        out = captured.out.strip()
        data = json.loads(out) if "--json" in argv and out else out
        return code, data, captured.err


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


def count_jobs(conn: psycopg.Connection) -> int:
    row = conn.execute("select count(*) from tickq.jobs").fetchone()
    assert row is not None
    return int(row[0])


def test_enqueue_prints_the_new_job(cli: Cli, conn: psycopg.Connection) -> None:
    code, data, _ = cli(
        "enqueue",
        "embed",
        "--payload",
        '{"doc": 1}',
        "--key",
        "doc-1",
        "--priority",
        "3",
        "--json",
    )

    assert code == 0
    assert (data["status"], data["duplicate"]) == ("queued", False)
    job = PostgresStore(conn).get(data["id"])
    assert (job.payload, job.idempotency_key, job.priority) == ({"doc": 1}, "doc-1", 3)


def test_enqueue_with_a_timeout_stores_it_and_show_prints_it(
    cli: Cli, conn: psycopg.Connection
) -> None:
    code, data, _ = cli("enqueue", "embed", "--timeout", "5", "--json")
    assert code == 0

    code, shown, _ = cli("show", data["id"], "--json")

    assert code == 0
    assert (shown["timeout_seconds"], shown["lease_seconds"]) == (5, 15)


def test_enqueue_of_a_held_key_reports_the_duplicate(cli: Cli, conn: psycopg.Connection) -> None:
    _, first, _ = cli("enqueue", "embed", "--key", "doc-1", "--json")

    code, second, _ = cli("enqueue", "embed", "--key", "doc-1", "--json")

    assert code == 0
    assert (second["id"], second["duplicate"]) == (first["id"], True)
    assert count_jobs(conn) == 1


def test_enqueue_with_count_makes_that_many_jobs(cli: Cli, conn: psycopg.Connection) -> None:
    code, data, _ = cli("enqueue", "embed", "--count", "4", "--json")

    assert code == 0
    assert len({row["id"] for row in data}) == 4
    assert count_jobs(conn) == 4


def test_the_json_flag_works_before_the_command_too(cli: Cli, conn: psycopg.Connection) -> None:
    code, data, _ = cli("--json", "enqueue", "embed")

    assert code == 0
    assert data["status"] == "queued"
    assert count_jobs(conn) == 1


def test_jobs_lists_filtered_jobs_as_json(cli: Cli, conn: psycopg.Connection) -> None:
    store = PostgresStore(conn)
    embed = store.enqueue(job_spec("embed")).id
    store.enqueue(job_spec("transcribe"))

    code, data, _ = cli("jobs", "--type", "embed", "--json")

    assert code == 0
    assert [row["id"] for row in data["jobs"]] == [str(embed)]
    assert data["next_cursor"] is None


def test_show_prints_one_job(cli: Cli, conn: psycopg.Connection) -> None:
    job_id = PostgresStore(conn).enqueue(job_spec("embed", {"doc": 7})).id

    code, data, _ = cli("show", str(job_id), "--json")

    assert code == 0
    assert (data["id"], data["payload"], data["status"]) == (str(job_id), {"doc": 7}, "queued")


def make_dead(conn: psycopg.Connection) -> UUID:
    store = PostgresStore(conn)
    job_id = store.enqueue(job_spec("embed", max_attempts=1)).id
    (job,) = store.claim()
    store.fail(job, "boom")
    return job_id


def test_dead_lists_dead_letters_and_retry_sends_one_back(
    cli: Cli, conn: psycopg.Connection
) -> None:
    dead = make_dead(conn)
    PostgresStore(conn).enqueue(job_spec("embed"))

    code, listed, _ = cli("dead", "--json")
    retry_code, retried, _ = cli("retry", str(dead), "--json")

    assert code == retry_code == 0
    assert [(row["id"], row["error"]) for row in listed["jobs"]] == [(str(dead), "boom")]
    assert [(row["id"], row["status"], row["attempts"]) for row in retried] == [
        (str(dead), "queued", 0)
    ]


def test_retry_dead_with_a_type_filter_retries_only_those(
    cli: Cli, conn: psycopg.Connection
) -> None:
    dead = make_dead(conn)

    code, retried, _ = cli("retry", "--dead", "--type", "embed", "--json")
    none_code, none, _ = cli("retry", "--dead", "--type", "other", "--json")

    assert (code, none_code) == (0, 0)
    assert [row["id"] for row in retried] == [str(dead)]
    assert none == []


def test_cancel_cancels_a_waiting_job(cli: Cli, conn: psycopg.Connection) -> None:
    job_id = PostgresStore(conn).enqueue(job_spec("embed")).id

    code, data, _ = cli("cancel", str(job_id), "--json")

    assert code == 0
    assert [row["status"] for row in data] == ["cancelled"]
    assert PostgresStore(conn).get(job_id).status == Status.CANCELLED


def test_jobs_shows_no_error_on_a_job_that_succeeded_after_failing(
    cli: Cli, conn: psycopg.Connection
) -> None:
    # Given a job that failed once and then succeeded, and one that failed for good
    store = PostgresStore(conn)
    now = store.now()
    later = now + timedelta(minutes=10)
    recovered = store.enqueue(job_spec("embed", max_attempts=2), now=now).id
    (first,) = store.claim(limit=1, now=now)
    store.fail(first, "boom-then-fine", now=now)
    (second,) = store.claim(limit=1, now=later)
    store.complete(second, {"ok": True}, now=later)
    dead = store.enqueue(job_spec("embed", max_attempts=1), now=later).id
    (third,) = store.claim(limit=1, now=later)
    store.fail(third, "boom-for-good", now=later)

    # When the jobs are listed for a person and for a machine
    code, table, _ = cli("jobs")
    _, data, _ = cli("jobs", "--json")

    # Then the succeeded job's row has no error; the dead one's keeps its own
    lines = {UUID(line.split()[1]): line for line in table.splitlines() if "embed" in line}
    assert code == 0 and "succeeded" in lines[recovered] and "boom" not in lines[recovered]
    assert "boom-for-good" in lines[dead]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", lines[recovered])
    # And the JSON keeps the data as stored: the earlier failure, and in the history
    (job,) = [j for j in data["jobs"] if j["id"] == str(recovered)]
    assert job["error"] == "boom-then-fine"
    assert [e["error"] for e in job["errors"]] == ["boom-then-fine"]


def test_stats_counts_jobs(cli: Cli, conn: psycopg.Connection) -> None:
    PostgresStore(conn).enqueue_many([job_spec("embed") for _ in range(3)])

    code, data, _ = cli("stats", "--json")

    assert code == 0
    rows = [r for r in data if (r["queue"], r["type"]) == ("default", "embed")]
    assert [(r["status"], r["count"]) for r in rows] == [("queued", 3)]


def test_tick_without_handlers_records_the_failures_and_reports_them(
    cli: Cli, conn: psycopg.Connection
) -> None:
    job_id = PostgresStore(conn).enqueue(job_spec("embed", max_attempts=2)).id

    code, report, stderr = cli("tick", "--json")

    assert code == 0
    assert (report["claimed"], report["retried"], report["succeeded"]) == (1, 1, 0)
    assert "no handler modules named (--tasks MODULE or TICKQ_TASK_MODULES" in stderr
    job = PostgresStore(conn).get(job_id)
    assert job.status == Status.RETRYING
    assert job.error is not None and "no handler registered" in job.error


# Bad input: exit code 2 (input) or 1 (refused), a clear message, nothing written


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["enqueue", "embed", "--payload", "{not json"], "--payload is not valid JSON"),
        (["enqueue", "embed", "--payload", "[1, 2]"], "payload"),
        (["enqueue", "embed", "--run-after", "tomorrow"], "ISO 8601"),
        (["enqueue", "embed", "--run-after", "2026-12-01T09:00:00"], "time zone"),
        (["enqueue", "embed", "--max-attempts", "-1"], "max_attempts"),
        (["enqueue", "embed", "--user", "someone"], "user_id"),
        (["enqueue", "bad type"], "type"),
        (["enqueue", "embed", "--payload", "@/nonexistent/payload.json"], "cannot read"),
        (["retry"], "give job ids, or --dead"),
        (["jobs", "--status", "done"], "status"),
        (["jobs", "--cursor", "garbage"], "cursor"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message_and_writes_nothing(
    cli: Cli, conn: psycopg.Connection, argv: list[str], message: str
) -> None:
    PostgresStore(conn).enqueue(job_spec("embed"))

    code, data, _ = cli(*argv, "--json")

    assert code == 2
    assert message in data["message"]
    assert count_jobs(conn) == 1


def test_bad_input_without_json_goes_to_stderr(cli: Cli, conn: psycopg.Connection) -> None:
    code, out, err = cli("enqueue", "embed", "--payload", "{not json")

    assert code == 2
    assert out == ""
    assert "error:" in err and "not valid JSON" in err
    assert count_jobs(conn) == 0


@pytest.mark.parametrize("command", ["show", "cancel", "retry"])
def test_an_unknown_job_id_exits_1_saying_not_found(
    cli: Cli, conn: psycopg.Connection, command: str
) -> None:
    code, data, _ = cli(command, UNKNOWN, "--json")

    assert code == 1
    assert data["error"] == "JobNotFound"
    assert f"job {UNKNOWN} not found" in data["message"]
    assert count_jobs(conn) == 0


def test_cancelling_a_finished_job_exits_1_and_changes_nothing(
    cli: Cli, conn: psycopg.Connection
) -> None:
    dead = make_dead(conn)

    code, data, _ = cli("cancel", str(dead), "--json")

    assert code == 1
    assert "it is dead" in data["message"]
    assert PostgresStore(conn).get(dead).status == Status.DEAD


def test_an_unreachable_database_exits_3(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", f"postgresql://nobody@/tickq?host={tmp_path}")

    code, data, _ = cli("stats", "--json")

    assert code == 3
    assert "cannot connect" in data["message"]


def test_a_malformed_option_is_an_argparse_usage_error(cli: Cli) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["enqueue", "embed", "--priority", "high"])

    assert raised.value.code == 2


def test_migrate_says_what_it_applied_then_that_nothing_was_left(
    cli: Cli, fresh_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", fresh_database_url)
    versions = migrate_versions()

    code, first, _ = cli("migrate")
    _, second, _ = cli("migrate")
    _, as_json, _ = cli("migrate", "--json")

    assert code == 0
    plural = "" if len(versions) == 1 else "s"
    assert first.splitlines() == [f"applied {len(versions)} migration{plural}:"] + [
        f"  {v}" for v in versions
    ]
    assert second == f"already up to date (schema version {versions[-1]})"
    assert as_json == {"applied": [], "version": versions[-1]}


def test_migrate_json_lists_every_version_applied_to_a_new_database(
    cli: Cli, fresh_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", fresh_database_url)

    code, data, _ = cli("migrate", "--json")

    assert code == 0
    assert data == {"applied": migrate_versions(), "version": migrate_versions()[-1]}


def test_show_says_how_the_handler_ran_the_job(cli: Cli, conn: psycopg.Connection) -> None:
    """ "part of batch X" for a batch handler's job, "completed in the handler's
    transaction" for a transactional one; in the JSON as batch_id and
    completed_in_transaction."""
    from queue_core import Registry, Runner

    registry = Registry()
    registry.task("embed", batch_size=5)(lambda batch: None)
    registry.task("charge", transactional=True)(lambda job, tx: None)
    store = PostgresStore(conn)
    batched = store.enqueue(registry.spec("embed")).id
    charged = store.enqueue(registry.spec("charge")).id
    with Runner(store, registry) as runner:
        runner.tick()

    _, batch_view, _ = cli("show", str(batched), "--json")
    _, batch_text, _ = cli("show", str(batched))
    _, charge_view, _ = cli("show", str(charged), "--json")
    _, charge_text, _ = cli("show", str(charged))

    assert batch_view["batch_id"] is not None and not batch_view["completed_in_transaction"]
    assert f"part of batch {batch_view['batch_id']}" in batch_text
    assert (charge_view["batch_id"], charge_view["completed_in_transaction"]) == (None, True)
    assert "completed in the handler's transaction" in charge_text
    assert "part of batch" not in charge_text


# tickq events: the outbox's latest events and its backlog; a bad job id is refused.


def dead_job(conn: psycopg.Connection) -> str:
    store = PostgresStore(conn)
    job_id = store.enqueue(job_spec("embed", {}, max_attempts=1)).id
    (job,) = store.claim(limit=1)
    store.fail(job, "boom")
    return str(job_id)


def test_events_lists_the_latest_and_the_backlog(cli: Cli, conn: psycopg.Connection) -> None:
    dead = dead_job(conn)
    publish(conn, "Invoice Paid", {"invoice": 7})
    conn.execute("update tickq.outbox set published_at = now() where detail_type <> 'Job Dead'")

    code, data, _ = cli("events", "--json")
    assert code == 0
    assert data["backlog"]["pending"] == 1 and data["backlog"]["oldest_seconds"] >= 0
    assert [(e["detail_type"], e["job_id"]) for e in data["events"]] == [
        ("Invoice Paid", None),
        ("Job Dead", dead),
    ]

    code, data, _ = cli("events", "--pending", "--json")
    assert [e["detail_type"] for e in data["events"]] == ["Job Dead"]
    code, data, _ = cli("events", "--job", UNKNOWN, "--json")
    assert data["events"] == []

    code, text, _ = cli("events")
    assert code == 0 and "1 event(s) waiting to be published" in text and "Job Dead" in text


def test_events_refuses_a_bad_job_id(cli: Cli, conn: psycopg.Connection) -> None:
    code, _, err = cli("events", "--job", "nope")
    assert code != 0 and "job_id" in err and "UUID" in err
