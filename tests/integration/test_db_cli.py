"""`tickq` as a user runs it, in its own processes: a local PostgreSQL kept running across
commands by `tickq db`, and tables read through a pipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from queue_core import enqueue
from queue_core.migrate import available

TICKQ = str(Path(sys.executable).parent / "tickq")


class Tickq:
    """Runs the installed `tickq` command with `env`, its output read through a pipe."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def __call__(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TICKQ, *argv], env=self.env, capture_output=True, text=True, timeout=120, check=False
        )

    def json(self, *argv: str) -> Any:
        done = self(*argv, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture
def local_tickq(tmp_path: Path) -> Iterator[Tickq]:
    """`tickq` without TICKQ_DATABASE_URL, its local data in a directory of this test; a
    server the test leaves running is stopped after it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKQ_")}
    env["TICKQ_LOCAL_DIR"] = str(tmp_path / "pgdata")
    tickq = Tickq(env)
    yield tickq
    tickq("db", "stop")


def test_db_start_keeps_one_server_and_its_data_for_every_later_command(local_tickq: Tickq) -> None:
    # Given nothing running
    assert local_tickq("db", "status").returncode == 1

    # When it is started (twice), its URL asked for, and other commands run without a URL
    started = local_tickq.json("db", "start")
    again = local_tickq.json("db", "start")
    url = local_tickq("db", "url").stdout.strip()
    first = local_tickq("migrate")
    second = local_tickq("migrate")
    enqueued = local_tickq.json("enqueue", "embed")
    listed = local_tickq.json("jobs")

    # Then they all used that one server, which kept the job between commands
    assert started["started"] is True and again == {**started, "started": False}
    assert url == started["url"]
    assert "`tickq db start` left running" in first.stderr and url in first.stderr
    assert first.stdout.startswith(f"applied {1 + len(available())} migrations:")  # baseline too
    assert second.stdout.startswith("already up to date")
    assert [job["id"] for job in listed["jobs"]] == [enqueued["id"]]
    with psycopg.connect(url) as conn:
        assert conn.execute("select count(*) from tickq.jobs").fetchone() == (1,)

    # When it is stopped, then nothing answers at its URL and `url` says so
    assert local_tickq.json("db", "stop")["stopped"] is True
    assert local_tickq("db", "status").returncode == 1
    missing = local_tickq("db", "url")
    assert missing.returncode == 1 and "tickq db start" in missing.stderr
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=5)

    # When it is started again, then the job is still there
    assert local_tickq.json("db", "start")["started"] is True
    assert [job["id"] for job in local_tickq.json("jobs")["jobs"]] == [enqueued["id"]]


def test_tables_read_through_a_pipe_keep_every_id_whole(
    conn: psycopg.Connection, database_url: str
) -> None:
    # Given jobs whose rows are wider than 80 columns
    ids = [str(enqueue(conn, f"a_rather_long_job_type_number_{n}").id) for n in range(3)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKQ_")}
    env["TICKQ_DATABASE_URL"] = database_url

    # When `tickq jobs` writes to a pipe (as in `tickq jobs | cat`)
    listed = Tickq(env)("jobs")

    # Then each job is one line holding its whole id and type
    assert listed.returncode == 0, listed.stderr
    for n, id_ in enumerate(ids):
        [line] = [line for line in listed.stdout.splitlines() if id_ in line]
        assert f"a_rather_long_job_type_number_{n}" in line
