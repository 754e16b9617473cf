"""Running handlers: `tickq tasks`, `migrate`, `tick` and `work`."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

import psycopg
from rich.table import Table

from queue_core import migrate as migrations
from queue_core.config import Settings
from queue_core.errors import DatabaseError
from queue_core.model import catalog
from queue_core.postgres import PostgresStore
from queue_core.postgres import catalog as task_catalog
from queue_core.runner.registry import Registry
from queue_core.runner.runner import Runner, TickReport
from queue_core.store.port import Store
from tickq.infra.cli import db as cli_db
from tickq.infra.cli.common import (
    EXIT_RESTART,
    UsageError,
    database,
    database_url,
    emit,
    err,
    load_registry,
    open_connection,
    out,
    positive,
    seconds_arg,
)


def report_table(report: TickReport) -> Table:
    table = Table(title="tick")
    data = report.as_dict()
    data.pop("dead_letters")
    for key in data:
        table.add_column(key)
    table.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in data.values()))
    return table


def cmd_migrate(args: argparse.Namespace) -> int:
    # On a terminal, say which version is being applied while it runs.
    with database(migrated=False) as conn, ExitStack() as stack:
        shown = not args.json and err.is_terminal
        status = stack.enter_context(err.status("migrating")) if shown else None

        def progress(version: str) -> None:
            if status is not None:
                status.update(f"applying {version}")

        applied = migrations.migrate(conn, progress=progress)
    cli_db.report_migrated(args, applied)
    return 0


def _runner(
    args: argparse.Namespace,
    store: Store,
    reg: Registry,
    time_left: Callable[[], float] | None = None,
) -> Runner:
    settings = Settings.from_env()
    return Runner(
        store,
        reg,
        queues=args.queue or settings.queues,
        batch_size=args.batch_size or settings.batch_size,
        concurrency=args.concurrency or settings.concurrency,
        lease_seconds=args.lease_seconds or settings.lease_seconds,
        time_left=time_left,
        max_abandoned=settings.max_abandoned_handlers,
    )


def _worker_registry(command: str, modules: Sequence[str] | None) -> Registry:
    """The handlers a tick or a worker runs, saying so on stderr when no module was named:
    every job it claims would then fail with "no handler registered"."""
    if not (modules or Settings.from_env().task_modules):
        err.print(
            f"tickq {command}: no handler modules named (--tasks MODULE or "
            "TICKQ_TASK_MODULES, the template's TaskModules): a job of a type no module "
            "registers fails with 'no handler registered'"
        )
    return load_registry(modules)


def _publish_tasks(conn: psycopg.Connection[Any], reg: Registry) -> None:
    """Publish the registry's task settings to the catalogue as a worker starts (a worker
    that cannot goes on, and says so)."""
    try:
        task_catalog.publish(conn, reg)
    except DatabaseError as exc:
        err.print(f"tickq: task settings not published to the catalogue: {exc}")


def cmd_tasks(args: argparse.Namespace) -> int:
    with database() as conn:
        if args.action == "sync":
            reg = load_registry(args.tasks)
            if not reg.tasks:
                raise UsageError(
                    "tickq tasks sync: no handler modules named (--tasks MODULE or "
                    "TICKQ_TASK_MODULES)"
                )
            published = task_catalog.publish(conn, reg)
            version = catalog.code_version(reg)
            emit(
                args,
                {"published": published, "code_version": version},
                lambda: out.print(
                    f"published {len(published)} task(s) ({version}): " + ", ".join(published)
                ),
            )
            return 0
        rows = task_catalog.entries(conn)
    emit(args, rows, lambda: out.print(_tasks_table(rows)))
    return 0


def _tasks_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="task catalogue")
    for column in ("type", "queue", "attempts", "lease", "backoff", "code version", "published"):
        table.add_column(column)
    for row in rows:
        defaults = row["defaults"]
        backoff = defaults.get("backoff")
        table.add_row(
            row["type"],
            str(defaults.get("queue", "default")),
            str(defaults.get("max_attempts", "")),
            str(defaults.get("lease_seconds", "")),
            "" if not backoff else json.dumps(backoff, separators=(",", ":")),
            row["code_version"] or "",
            str(row["published_at"]),
        )
    return table


def cmd_tick(args: argparse.Namespace) -> int:
    reg = _worker_registry("tick", args.tasks)
    # --max-seconds plays a Lambda's timeout: no claims after it, and steps that would not
    # fit before it suspend their job (docs/steps.md).
    ends = None if args.max_seconds is None else time.monotonic() + args.max_seconds
    time_left = None if ends is None else (lambda: ends - time.monotonic())
    pin = catalog.pinned_version(reg)
    with (
        database() as conn,
        _runner(args, PostgresStore(conn, pin_version=pin), reg, time_left) as runner,
    ):
        _publish_tasks(conn, reg)
        report = runner.tick(
            max_batches=args.max_batches,
            should_continue=(lambda: True) if time_left is None else (lambda: time_left() > 0),
        )
    emit(args, report.as_dict(), lambda: out.print(report_table(report)))
    return 0


def cmd_work(args: argparse.Namespace) -> int:
    from tickq.infra.cli.progress import WorkStatus, live_status

    reg = _worker_registry("work", args.tasks)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    deadline = time.monotonic() + args.max_seconds if args.max_seconds else None
    settings = Settings.from_env()
    with database_url() as url:
        pin = catalog.pinned_version(reg)

        def connect_store() -> PostgresStore:
            return PostgresStore(open_connection(url, settings), pin_version=pin)

        runner = _runner(args, connect_store(), reg)
        with open_connection(url, settings) as publishing:
            _publish_tasks(publishing, reg)
        status = WorkStatus()

        def until() -> None:
            with open_connection(url, settings) as watch:
                while not stop.wait(0.2):
                    if deadline is not None and time.monotonic() >= deadline:
                        stop.set()
                    if args.until_empty and not PostgresStore(watch).has_pending(runner.queues):
                        stop.set()

        watcher = threading.Thread(target=until, daemon=True)
        watcher.start()
        # TICKQ_PREPARE_THRESHOLD=off is the setting for a transaction-mode pooler (RDS
        # Proxy, PgBouncer), which hands each transaction to any server session: a LISTEN
        # there would wake nobody, so the worker polls, and says so once.
        listen = settings.prepare_threshold is not None
        if not listen:
            err.print(
                "tickq work: prepared statements are off (TICKQ_PREPARE_THRESHOLD=off, as "
                "behind a transaction-mode pooler), where LISTEN cannot wake this worker; "
                f"polling every {args.poll_interval:g} s instead",
                highlight=False,
            )
        shown = not args.json and err.is_terminal
        with runner, live_status(err, status, shown=shown):
            report = runner.work(
                stop=stop,
                poll_interval=args.poll_interval,
                on_tick=status.add,
                reconnect=connect_store,
                listen=listen,
            )
        runner.store.close()
    emit(args, report.as_dict(), lambda: out.print(report_table(report)))
    if report.abandoned_past_bound:
        # Python cannot stop those threads; only a fresh process is rid of them. Every
        # outcome is saved: the worker starts afresh in place (the same command, the same
        # process id, none of its threads), or exits for its supervisor to start it again.
        restart = getattr(args, "restartable", False) and not args.exit_on_abandoned
        err.print(
            f"tickq work: {report.abandoned_handlers} handler thread(s) abandoned at their "
            "timeout still run, past TICKQ_MAX_ABANDONED_HANDLERS "
            f"({settings.max_abandoned_handlers}); claiming stopped and every outcome saved; "
            + (
                "starting afresh in place"
                if restart
                else f"exiting with code {EXIT_RESTART} to be started afresh"
            ),
            highlight=False,
        )
        if restart:
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(sys.executable, sys.orig_argv)
        return EXIT_RESTART
    return 0


def register(command: Any) -> None:
    """Add the workers verbs through program.build_parser's `command` factory."""

    def worker_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--tasks", nargs="*", help="handler modules (else TICKQ_TASK_MODULES)")
        p.add_argument("--queue", action="append", help="queue to claim from (repeatable)")
        p.add_argument(
            "--batch-size",
            type=positive,
            help="jobs per claim with one handler; with several, the unit of jobs claimed ahead",
        )
        p.add_argument("--concurrency", type=positive, help="handlers run at once")
        p.add_argument("--lease-seconds", type=positive, help="lease for jobs without one")

    p = command(
        "tasks",
        cmd_tasks,
        "the task catalogue: each type's settings as the workers' code declares them",
        "  tickq tasks                                 list the catalogue\n"
        "  tickq tasks sync --tasks myapp.tasks        publish the modules' tasks (a deploy step)",
    )
    p.add_argument("action", nargs="?", choices=["list", "sync"], default="list")
    p.add_argument("--tasks", nargs="*", help="handler modules (else TICKQ_TASK_MODULES)")

    command(
        "migrate",
        cmd_migrate,
        "apply pending schema migrations",
        "  tickq migrate                               create or upgrade the schema\n"
        "  tickq migrate --json                        list what was applied",
    )

    p = command(
        "tick",
        cmd_tick,
        "run one tick: reclaim, then claim/run/persist until drained",
        "  tickq tick --tasks myapp.tasks              what TickFunction does once\n"
        "  tickq tick --tasks myapp.tasks --max-batches 1 --batch-size 50",
    )
    worker_options(p)
    p.add_argument("--max-batches", type=positive)
    p.add_argument(
        "--max-seconds",
        type=seconds_arg,
        help="end the tick after this long, as a function timeout would (steps suspend)",
    )

    p = command(
        "work",
        cmd_work,
        "run a long-lived worker until SIGINT/SIGTERM",
        "  tickq work --tasks myapp.tasks              until Ctrl-C; live counts on a terminal\n"
        "  tickq work --tasks myapp.tasks --until-empty --queue bulk\n"
        "  tickq work --max-seconds 300 --concurrency 20",
    )
    worker_options(p)
    p.add_argument("--poll-interval", type=seconds_arg, default=1.0, help="idle sleep, seconds")
    p.add_argument("--max-seconds", type=seconds_arg, help="stop after this long")
    p.add_argument("--until-empty", action="store_true", help="stop when nothing is left")
    p.add_argument(
        "--exit-on-abandoned",
        action="store_true",
        help="past TICKQ_MAX_ABANDONED_HANDLERS, exit with code 75 for a supervisor to start "
        "it again, instead of starting afresh in place",
    )
