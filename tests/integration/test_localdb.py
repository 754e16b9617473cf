"""LocalPostgres: the throwaway server that every other integration test stands on."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest

from tickq.infra.local.postgres import LocalPostgres, LocalPostgresError


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    # A zombie is dead; it only waits for an init that may never reap it.
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_started_server_answers_over_socket_and_tcp() -> None:
    with LocalPostgres(settings={"work_mem": "8MB"}) as pg:
        with psycopg.connect(pg.url) as conn:
            row = conn.execute(
                "SELECT 1, current_setting('fsync'), current_setting('work_mem')"
            ).fetchone()
        with psycopg.connect(pg.tcp_url) as conn:
            over_tcp = conn.execute("SELECT 1").fetchone()

    assert row == (1, "off", "8MB")
    assert over_tcp == (1,)


def test_version_is_the_server_major_version() -> None:
    with LocalPostgres() as pg, psycopg.connect(pg.url) as conn:
        assert pg.version == conn.info.server_version // 10000


def test_stop_removes_temporary_directories_and_the_server() -> None:
    pg = LocalPostgres().start()
    data_dir, pid = pg.data_dir, pg.pid
    assert data_dir is not None and data_dir.is_dir()

    pg.stop()

    assert not data_dir.exists()
    assert not data_dir.parent.exists()
    assert not _alive(pid)
    pg.stop()  # idempotent


def test_explicit_data_dir_is_kept_and_reused(tmp_path: Path) -> None:
    data_dir = tmp_path / "pgdata"
    with LocalPostgres(data_dir=data_dir) as pg, psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (x int)")

    with LocalPostgres(data_dir=data_dir) as pg, psycopg.connect(pg.url) as conn:
        assert conn.execute("SELECT to_regclass('kept') IS NOT NULL").fetchone() == (True,)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux")
def test_server_dies_when_its_owner_is_sigkilled() -> None:
    script = textwrap.dedent(
        """
        import json, time
        from tickq.infra.local.postgres import LocalPostgres
        pg = LocalPostgres().start()
        print(json.dumps({"pid": pg.pid, "dir": str(pg.data_dir.parent)}), flush=True)
        time.sleep(120)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    started = json.loads(owner.stdout.readline())
    try:
        assert _alive(started["pid"])

        owner.send_signal(signal.SIGKILL)
        owner.wait()

        deadline = time.monotonic() + 10
        while _alive(started["pid"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(started["pid"]), "postmaster outlived its SIGKILLed owner"
    finally:
        if _alive(started["pid"]):
            os.kill(started["pid"], signal.SIGKILL)
        shutil.rmtree(started["dir"], ignore_errors=True)


def test_failed_start_reports_the_server_log() -> None:
    with pytest.raises(LocalPostgresError, match="shared_buffers"):
        LocalPostgres(settings={"shared_buffers": "lots"}).start()


def test_missing_binaries_are_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKQ_PG_BIN", str(tmp_path))

    with pytest.raises(LocalPostgresError, match="initdb is missing"):
        LocalPostgres()
