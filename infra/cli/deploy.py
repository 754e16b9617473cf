"""`tickq deploy check` and `tickq deploy drained`: before and after a deploy of durable
handler code (docs/steps.md, "Deploying durable code")."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rich.table import Table

from queue_core.deploys import deploy_check
from queue_core.model.validation import text
from queue_core.postgres.deploys import unfinished_of_version
from queue_core.runner.replay import DeployCheck
from tickq.infra.cli.common import EXIT_REFUSED, UsageError, database, emit, load_registry, out

Command = Callable[..., argparse.ArgumentParser]


def cmd_deploy(args: argparse.Namespace) -> int:
    if args.action == "check":
        return _check(args)
    return _drained(args)


def _check(args: argparse.Namespace) -> int:
    if args.version is not None:
        raise UsageError("tickq deploy check takes --tasks, not --version")
    reg = load_registry(args.tasks)
    if not reg.tasks:
        raise UsageError(
            "tickq deploy check: no handler modules named, or they define no task "
            "(--tasks MODULE or TICKQ_TASK_MODULES)"
        )
    with database() as conn:
        found = deploy_check(conn, reg.tasks)
    emit(args, found.to_dict(), lambda: _print_check(found))
    return EXIT_REFUSED if found.broken else 0


def _print_check(found: DeployCheck) -> None:
    if found.broken:
        table = Table(title=f"{len(found.broken)} job(s) the new code would break")
        for column in ("job", "type", "code version", "position", "stored", "asked", "why"):
            table.add_column(column, overflow="fold")
        for replayed in found.broken:
            job, broken = replayed.history.job, replayed.broken
            assert broken is not None
            table.add_row(
                str(job.id),
                job.type,
                replayed.history.code_version or "",
                str(broken.position),
                broken.stored or "",
                broken.asked or "(none)",
                broken.reason,
            )
        out.print(table)
    else:
        out.print(f"ok: the new code replays all {len(found.replays)} unfinished durable job(s)")
    for type_, why in sorted(found.skipped.items()):
        out.print(f"not checked: {type_}: {why}")
    for name, lacking in sorted(found.patches.items()):
        if lacking:
            out.print(f"patch {name!r}: {lacking} stored history(ies) lack it: keep job.patched")
        else:
            out.print(f"patch {name!r}: no stored history lacks it: its old branch may go")


def _drained(args: argparse.Namespace) -> int:
    if args.version is None:
        raise UsageError("tickq deploy drained needs --version V (a code version)")
    version = text(args.version, "--version", 200)
    with database() as conn:
        left = unfinished_of_version(conn, version)
    data: dict[str, Any] = {"version": version, "drained": not left, "unfinished": left}

    def human() -> None:
        if not left:
            out.print(f"drained: no unfinished job last ran under {version}")
        else:
            counts = ", ".join(f"{n} {status}" for status, n in left.items())
            out.print(f"not drained: {counts} last ran under {version}")

    emit(args, data, human)
    return 0 if not left else EXIT_REFUSED


def register(command: Command) -> None:
    """Add `tickq deploy` through cli.build_parser's `command` factory."""
    p = command(
        "deploy",
        cmd_deploy,
        "before and after a deploy of durable handlers: replay stored histories, drain a version",
        "  tickq deploy check --tasks myapp.tasks      exit 1 names jobs the new code breaks\n"
        "  tickq deploy drained --version v41          exit 0 once no job of v41 is unfinished",
    )
    p.add_argument("action", choices=["check", "drained"])
    p.add_argument("--tasks", nargs="*", help="the new handler modules (else TICKQ_TASK_MODULES)")
    p.add_argument("--version", help="drained: the code version whose jobs to count")
