"""What every `tickq` verb shares: the database session, output consoles, JSON/--json
rendering, the usage error and the argument parsers that more than one verb module uses.

Every verb module of tickq.infra.cli imports this module; it imports none of them.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from rich.console import Console

from queue_core import migrate as migrations
from queue_core.config import Settings
from queue_core.errors import ConfigurationError, DatabaseError, TickqError
from queue_core.runner.registry import Registry, registry
from tickq.infra.local import kept_server
from tickq.infra.local.postgres import LocalPostgres, LocalPostgresError, pg_bin_dir

EXIT_REFUSED, EXIT_INPUT, EXIT_DATABASE = 1, 2, 3
# `tickq work` stopped itself to be started afresh (its abandoned handler threads passed
# TICKQ_MAX_ABANDONED_HANDLERS): sysexits' EX_TEMPFAIL, "try again".
EXIT_RESTART = 75
LOCAL_DATA_DIR = Path(os.environ.get("TICKQ_LOCAL_DIR", "~/.cache/tickq/pgdata")).expanduser()

# Read by a pipe (grep, cut, a file) rather than a terminal, output is not fitted to 80
# columns: a table keeps each row on one line and its ids whole.
PIPE_WIDTH = 10_000


def _console(*, stderr: bool) -> Console:
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal:
        console.width = PIPE_WIDTH
    return console


out = _console(stderr=False)
err = _console(stderr=True)


class UsageError(TickqError):
    """The command line is invalid."""


# Database session


@contextmanager
def database_url(*, throwaway: bool = False, migrated: bool = True) -> Iterator[str]:
    """TICKQ_DATABASE_URL, else the local PostgreSQL `tickq db start` left running, else an
    embedded one for this command, saying which; a local one is migrated unless `migrated`
    is False (`tickq migrate` itself says what it applies)."""
    settings = Settings.from_env()
    if settings.database_url:
        yield settings.database_url
        return
    kept = None if throwaway else kept_server.find(LOCAL_DATA_DIR)
    if kept is not None:
        err.print(
            "[dim]TICKQ_DATABASE_URL is not set: using the local PostgreSQL that "
            f"`tickq db start` left running at {kept.url}[/]"
        )
        if migrated:
            _migrate(kept.url, settings)
        yield kept.url
        return
    try:
        pg_bin_dir()  # no binaries: say which extra, before announcing a server
    except LocalPostgresError as exc:
        raise ConfigurationError(str(exc)) from None
    data_dir = None if throwaway else LOCAL_DATA_DIR
    if data_dir is not None:
        data_dir.parent.mkdir(parents=True, exist_ok=True)
    where = "a throwaway directory" if data_dir is None else str(data_dir)
    err.print(
        f"[dim]TICKQ_DATABASE_URL is not set: using an embedded local PostgreSQL in {where}[/]"
    )
    try:
        server = LocalPostgres(data_dir=data_dir).start()
    except LocalPostgresError as exc:
        raise ConfigurationError(str(exc)) from exc
    try:
        if migrated:
            _migrate(server.url, settings)
        yield server.url
    finally:
        server.stop()


def _migrate(url: str, settings: Settings) -> None:
    with _connect(url, settings) as conn:
        migrations.migrate(conn)


@contextmanager
def database(
    *, throwaway: bool = False, migrated: bool = True
) -> Iterator[psycopg.Connection[Any]]:
    """A connection to TICKQ_DATABASE_URL or to a local PostgreSQL (see database_url)."""
    settings = Settings.from_env()
    with (
        database_url(throwaway=throwaway, migrated=migrated) as url,
        _connect(url, settings) as conn,
    ):
        yield conn


def open_connection(url: str, settings: Settings) -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(
            url, autocommit=True, prepare_threshold=settings.prepare_threshold, connect_timeout=10
        )
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"cannot connect to the database: {exc}".strip()) from exc


@contextmanager
def _connect(url: str, settings: Settings) -> Iterator[psycopg.Connection[Any]]:
    with open_connection(url, settings) as conn:
        yield conn


def load_registry(modules: Sequence[str] | None = None) -> Registry:
    settings = Settings.from_env()
    registry.load_modules(modules or settings.task_modules)
    return registry


# Rendering


def emit(args: argparse.Namespace, data: Any, human: Callable[[], None]) -> None:
    if args.json:
        print(json.dumps(data, default=str, indent=2))
    else:
        human()


# Argument parsing


def when(value: datetime | None) -> str:
    """A time as every human table writes it: local, with its zone named as an offset
    ("2026-12-02 09:27:37 UTC+9"), the way the console page writes it."""
    if value is None:
        return ""
    local = value.astimezone()
    return f"{local:%Y-%m-%d %H:%M:%S} {_zone(local)}"


def _zone(local: datetime) -> str:
    offset = local.utcoffset()
    minutes = 0 if offset is None else int(offset.total_seconds() // 60)
    if minutes == 0:
        return "UTC"
    hours, rest = divmod(abs(minutes), 60)
    return f"UTC{'-' if minutes < 0 else '+'}{hours}" + (f":{rest:02d}" if rest else "")


def json_arg(raw: str | None, flag: str) -> Any:
    if raw is None:
        return {}
    if raw.startswith("@"):
        try:
            raw = Path(raw[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{flag}: cannot read {raw[1:]}: {exc.strerror}") from None
        except (ValueError, UnicodeError) as exc:  # a NUL in the path, a file not UTF-8
            raise UsageError(f"{flag}: cannot read {raw[1:]!r}: {exc}") from None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} is not valid JSON: {exc}") from None


def time_arg(raw: str) -> datetime:
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise UsageError(f"--run-after must be an ISO 8601 time, got {raw!r}") from None
    if value.tzinfo is None:
        raise UsageError("--run-after needs a time zone, e.g. 2026-12-01T09:00:00+09:00")
    return value


def positive(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {raw!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


STATUS_STYLE = {
    "waiting": "blue",
    "queued": "cyan",
    "running": "yellow",
    "retrying": "magenta",
    "succeeded": "green",
    "dead": "bold red",
    "cancelled": "dim",
    "suspended": "blue",  # a state, not a status: queued with a wait (Job.state)
}


def styled_status(value: str) -> str:
    return f"[{STATUS_STYLE.get(value, '')}]{value}[/]"


def seconds_arg(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {raw!r}") from None
    if not 0 <= value <= 86_400 * 366:
        raise argparse.ArgumentTypeError(f"expected 0 to 31622400 seconds, got {raw}")
    return value


def int_arg(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {raw!r}") from None
