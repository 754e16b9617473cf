"""`tickq queues` (list, pause, resume) and `tickq maintain`, the operator console's verbs.

`main.build_parser` registers them; they share `common`'s database session, rendering
and exit codes.
"""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Callable
from datetime import datetime
from typing import Any

from rich.table import Table

from queue_core.console.charts import QueueHistory, depth_by_queue
from queue_core.policies import partitions
from queue_core.policies import retention as retention_
from queue_core.policies.pauses import QueuePause, QueuePauses
from queue_core.postgres import PostgresStore
from queue_core.runner.runner import Runner, TickReport
from tickq.infra.cli.common import database, emit, load_registry, out, when

Command = Callable[[str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


def cmd_queues(args: argparse.Namespace) -> int:
    with database() as conn:
        pauses = QueuePauses(conn)
        if args.action == "pause":
            pause = pauses.pause(args.queue, by=args.by or _who(), reason=args.reason)
            emit(args, pause.as_dict(), lambda: out.print(_paused_line(pause)))
            return 0
        if args.action == "resume":
            pause = pauses.resume(args.queue)
            emit(
                args,
                {**pause.as_dict(), "resumed": True},
                lambda: out.print(f"resumed {pause.queue} (paused by {pause.paused_by})"),
            )
            return 0
        paused = {p.queue: p for p in pauses.all()}
        depths = depth_by_queue(PostgresStore(conn).stats())
    names = sorted(set(depths) | set(paused))
    data = [_queue_data(q, depths.get(q), paused.get(q)) for q in names]
    emit(args, data, lambda: out.print(_queues_table(data)))
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    """What MaintenanceFunction does, once, here: reclaim, make the day partitions of
    finished jobs ahead, prune, sample queue depth."""
    with database() as conn:
        store = PostgresStore(conn)
        report = TickReport()
        Runner(store, load_registry(args.tasks)).reclaim(report)
        created = partitions.ensure(conn)
        pruned = retention_.Retention(conn).prune()
        sampled = QueueHistory(conn).record_depth(store.stats())
    data = {
        "reclaimed": report.reclaimed,
        "dead": report.dead,
        "partitions_created": created,
        "pruned": pruned.as_dict(),
        "depth_samples": sampled,
    }

    def human() -> None:
        out.print(
            f"reclaimed {report.reclaimed} expired leases ({report.dead} went dead), "
            f"made {created} day partitions, pruned {pruned.deleted} finished jobs, "
            f"sampled the depth of {sampled} queues"
        )

    emit(args, data, human)
    return 0


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return "tickq cli"


def _paused_line(pause: QueuePause) -> str:
    why = f": {pause.reason}" if pause.reason else ""
    return f"paused {pause.queue} (by {pause.paused_by} at {when(pause.paused_at)}){why}"


def _queue_data(
    queue: str, depth: tuple[int, int, float | None] | None, pause: QueuePause | None
) -> dict[str, Any]:
    waiting, running, oldest = depth or (0, 0, None)
    return {
        "queue": queue,
        "depth": waiting,
        "running": running,
        "oldest_runnable_seconds": oldest,
        "paused": pause is not None,
        "paused_by": None if pause is None else pause.paused_by,
        "paused_at": None if pause is None else pause.paused_at.isoformat(),
        "reason": None if pause is None else pause.reason,
    }


def _queues_table(data: list[dict[str, Any]]) -> Table:
    table = Table(title="queues")
    for column in ("queue", "depth", "running", "oldest runnable", "paused"):
        table.add_column(column)
    for q in data:
        oldest = q["oldest_runnable_seconds"]
        at = when(datetime.fromisoformat(q["paused_at"])) if q["paused"] else ""
        paused = f"[yellow]paused by {q['paused_by']} at {at}[/]" if q["paused"] else ""
        table.add_row(
            q["queue"],
            str(q["depth"]),
            str(q["running"]),
            "" if oldest is None else f"{oldest:.1f} s",
            paused,
        )
    if not data:
        table.caption = "no queues"
    return table


def register(command: Command) -> None:
    """Add the console verbs through cli.build_parser's `command` factory."""
    p = command("queues", cmd_queues, "list queues, pause a queue, resume it")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, help: str) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=help, description=help)
        # SUPPRESS: the action's default must not undo `tickq --json queues list`.
        sub.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
        )
        return sub

    action("list", "queues with their depth and whether they are paused")
    a = action("pause", "stop claiming the queue's jobs (enqueue still works)")
    a.add_argument("queue")
    a.add_argument("--reason", help="why, shown next to the pause")
    a.add_argument("--by", help="who paused it (default: your login name)")
    action("resume", "claim the queue's jobs again").add_argument("queue")

    p = command(
        "maintain",
        cmd_maintain,
        "reclaim expired leases, make day partitions, prune, sample queue depth (once)",
    )
    p.add_argument("--tasks", nargs="*", help="handler modules (else TICKQ_TASK_MODULES)")
