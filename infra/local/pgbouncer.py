"""A throwaway PgBouncer in transaction mode in front of a PostgreSQL server, for tests.

RDS Proxy, which Lambda fleets use to reach PostgreSQL, multiplexes transactions over a
few server connections the way PgBouncer's `pool_mode = transaction` does; this runs
Debian's `pgbouncer` that way, with a pool smaller than the number of clients, so tests
prove what tickq relies on (no session state between transactions) rather than assume it.
Like the local server, it runs as an unprivileged user when we are root.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tickq.infra.local.postgres import _die_with_parent, _free_port, _privilege_wrapper

READY_TIMEOUT_S = 15.0


class PgBouncerError(RuntimeError):
    """PgBouncer is missing or could not start."""


def pgbouncer_binary() -> str | None:
    """Path of the pgbouncer executable, or None when it is not installed."""
    return shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer",) if Path(p).is_file()), None
    )


class LocalPgBouncer:
    """PgBouncer on a free loopback port forwarding every database of `server_url`'s server.

    `users` are the login names clients may use (authentication is `trust`, as on the
    throwaway server behind it); `pool_size` server connections serve each (user, database).
    """

    def __init__(self, server_url: str, users: list[str], *, pool_size: int = 3) -> None:
        self.server = conninfo_to_dict(server_url)
        self.users = users
        self.pool_size = pool_size
        self.port = 0
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def url(self, server_login_url: str) -> str:
        """`server_login_url` (a login and database of the server) through the pooler."""
        return make_conninfo(server_login_url, host="127.0.0.1", port=str(self.port))

    def start(self) -> Self:
        binary = pgbouncer_binary()
        if binary is None:
            raise PgBouncerError("pgbouncer is not installed (apt-get install pgbouncer)")
        self._dir = Path(tempfile.mkdtemp(prefix="tq-pgb-"))
        self._dir.chmod(0o755)  # readable by the unprivileged user it runs as
        self.port = _free_port()
        config = self._dir / "pgbouncer.ini"
        users = self._dir / "users.txt"
        users.write_text("".join(f'"{name}" ""\n' for name in self.users), encoding="utf-8")
        config.write_text(self._config(users), encoding="utf-8")
        for path in (config, users):
            path.chmod(0o644)
        self._log = (self._dir / "pgbouncer.log").open("ab")
        self._proc = subprocess.Popen(
            [*_privilege_wrapper(), binary, str(config)],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent(),
        )
        self._wait_ready()
        return self

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def log_tail(self, limit: int = 4000) -> str:
        if self._dir is None:
            return ""
        with contextlib.suppress(OSError):
            return (self._dir / "pgbouncer.log").read_text(errors="replace")[-limit:]
        return ""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _config(self, users: Path) -> str:
        host = str(self.server.get("host") or "127.0.0.1")
        if host.startswith("/"):  # the server's Unix socket: reach it over loopback TCP
            host = "127.0.0.1"
        port = str(self.server.get("port") or "5432")
        return "\n".join(
            [
                "[databases]",
                f"* = host={host} port={port}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {self.port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {users}",
                "pool_mode = transaction",
                f"default_pool_size = {self.pool_size}",
                "min_pool_size = 0",
                "reserve_pool_size = 0",
                "max_client_conn = 200",
                "server_reset_query =",
                "ignore_startup_parameters = extra_float_digits",
                "",
            ]
        )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        probe = make_conninfo(
            host="127.0.0.1", port=str(self.port), user=self.users[0], dbname="postgres"
        )
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                break
            try:
                with psycopg.connect(probe, connect_timeout=2, prepare_threshold=None) as conn:
                    conn.execute("select 1")
                return
            except psycopg.OperationalError:
                time.sleep(0.1)
        tail = self.log_tail()
        self.stop()
        raise PgBouncerError(f"pgbouncer did not start:\n{tail}")
