"""The database verbs beside `tickq migrate`: what a migration run applied, and
`tickq db start|stop|url|status`, a local PostgreSQL kept running across commands."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from queue_core import migrate as migrations
from queue_core.errors import ConfigurationError, TickqError
from tickq.infra.cli.common import EXIT_REFUSED, LOCAL_DATA_DIR, emit, out
from tickq.infra.local import kept_server
from tickq.infra.local.postgres import LocalPostgresError

Command = Callable[..., argparse.ArgumentParser]

EXAMPLES = """\
  tickq db start                              start it (data in ~/.cache/tickq/pgdata,
                                              or TICKQ_LOCAL_DIR)
  export TICKQ_DATABASE_URL=$(tickq db url)   point other tools at it
  tickq db status                             running? (exit code 1 when not)
  tickq db stop                               stop it; the data stays for the next start

While it runs, tickq commands without TICKQ_DATABASE_URL use it (and say so)."""


class NotRunning(TickqError):
    """No local PostgreSQL is running: start one with `tickq db start`."""


def report_migrated(args: argparse.Namespace, applied: Sequence[str]) -> None:
    """Say what `tickq migrate` applied, or that there was nothing to apply."""
    version = migrations.versions()[-1]
    data = {"applied": list(applied), "version": version}
    if not applied:
        text = f"already up to date (schema version {version})"
    else:
        plural = "" if len(applied) == 1 else "s"
        text = f"applied {len(applied)} migration{plural}:\n" + "\n".join(
            f"  {name}" for name in applied
        )
    emit(args, data, lambda: out.print(text))


def cmd_db(args: argparse.Namespace) -> int:
    return int(ACTIONS[args.action](args))


def _start(args: argparse.Namespace) -> int:
    try:
        server, started = kept_server.start(LOCAL_DATA_DIR)
    except LocalPostgresError as exc:
        raise ConfigurationError(str(exc)) from exc
    news = "started" if started else "already running:"
    emit(
        args,
        {**server.as_dict(), "started": started},
        lambda: out.print(
            f"{news} a local PostgreSQL at {server.url} (data in {server.data_dir})\n"
            "tickq commands without TICKQ_DATABASE_URL use it; for other tools:\n"
            "  export TICKQ_DATABASE_URL=$(tickq db url)"
        ),
    )
    return 0


def _url(args: argparse.Namespace) -> int:
    server = _running()
    emit(args, {"url": server.url}, lambda: print(server.url))
    return 0


def _status(args: argparse.Namespace) -> int:
    server = kept_server.find(LOCAL_DATA_DIR)
    if server is None:
        data: dict[str, Any] = {"running": False, "data_dir": str(LOCAL_DATA_DIR)}
        emit(args, data, lambda: out.print(f"not running (data dir {LOCAL_DATA_DIR})"))
        return EXIT_REFUSED
    emit(
        args,
        {"running": True, **server.as_dict()},
        lambda: out.print(f"running at {server.url} (pid {server.pid}, data in {server.data_dir})"),
    )
    return 0


def _stop(args: argparse.Namespace) -> int:
    server = kept_server.stop(LOCAL_DATA_DIR)
    data: dict[str, Any] = {"stopped": server is not None, "data_dir": str(LOCAL_DATA_DIR)}
    text = (
        "no local PostgreSQL was running"
        if server is None
        else f"stopped the local PostgreSQL at {server.url} (data kept in {server.data_dir})"
    )
    emit(args, data, lambda: out.print(text))
    return 0


def _running() -> kept_server.KeptServer:
    server = kept_server.find(LOCAL_DATA_DIR)
    if server is None:
        raise NotRunning()
    return server


ACTIONS: dict[str, Callable[[argparse.Namespace], int]] = {
    "start": _start,
    "stop": _stop,
    "url": _url,
    "status": _status,
}


def register(command: Command) -> None:
    p = command(
        "db",
        cmd_db,
        "keep a local PostgreSQL running across commands",
        EXAMPLES,
    )
    p.add_argument("action", choices=tuple(ACTIONS), help="start, stop, url or status")
