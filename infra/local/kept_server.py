"""The local PostgreSQL that `tickq db start` leaves running, found again by later commands.

Its URL and pid are recorded in its data directory (STATE_FILE). A recorded server counts
as running only while it accepts connections there, so a stale record (after a reboot, or
a server killed by hand) is ignored and removed rather than trusted.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from tickq.infra.local.postgres import LocalPostgres

STATE_FILE = "tickq-server.json"
STOP_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class KeptServer:
    url: str
    pid: int
    data_dir: Path

    def as_dict(self) -> dict[str, Any]:
        return {"url": self.url, "pid": self.pid, "data_dir": str(self.data_dir)}


def find(data_dir: Path) -> KeptServer | None:
    """The server recorded in `data_dir` if it is running there, else None."""
    state = data_dir / STATE_FILE
    try:
        recorded = json.loads(state.read_text(encoding="utf-8"))
        server = KeptServer(str(recorded["url"]), int(recorded["pid"]), data_dir)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if _postmaster_pid(data_dir) == server.pid and _accepts(server.url):
        return server
    state.unlink(missing_ok=True)
    return None


def start(data_dir: Path) -> tuple[KeptServer, bool]:
    """Start a server on `data_dir` (initialised if new) that outlives this process, or
    find the one already running; returns it and whether it was started now."""
    found = find(data_dir)
    if found is not None:
        return found, False
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    postgres = LocalPostgres(data_dir=data_dir, keep_running=True).start()
    url = postgres.url
    server = KeptServer(url, postgres.detach(), data_dir)
    (data_dir / STATE_FILE).write_text(json.dumps(server.as_dict()), encoding="utf-8")
    return server, True


def stop(data_dir: Path) -> KeptServer | None:
    """Stop the server running on `data_dir` (fast shutdown: sessions are ended, the data
    kept); returns it, or None when none was running."""
    server = find(data_dir)
    if server is None:
        return None
    os.kill(server.pid, signal.SIGINT)
    # The server removes postmaster.pid as the last step of its shutdown.
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
    while _postmaster_pid(data_dir) == server.pid and time.monotonic() < deadline:
        time.sleep(0.05)
    if _postmaster_pid(data_dir) == server.pid:
        os.kill(server.pid, signal.SIGKILL)
    (data_dir / STATE_FILE).unlink(missing_ok=True)
    return server


def _postmaster_pid(data_dir: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((data_dir / "postmaster.pid").read_text().split()[0])
    return None


def _accepts(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2, autocommit=True) as conn:
            conn.execute("select 1")
    except psycopg.OperationalError:
        return False
    return True
