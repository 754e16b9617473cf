"""The `tickq signal` verb and how `tickq show` lists a job's steps (docs/steps.md)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rich.table import Table

from queue_core.model.steps import DurableView
from queue_core.postgres import PostgresStore, StepStore
from tickq.infra.cli.common import database, emit, json_arg, out

Command = Callable[..., argparse.ArgumentParser]
# `tickq show` lists this many of a job's latest steps; --json lists them all.
SHOWN_STEPS = 20


def cmd_signal(args: argparse.Namespace) -> int:
    payload = None if args.payload is None else json_arg(args.payload, "--payload")
    with database() as conn:
        woke = StepStore(PostgresStore(conn)).signal(args.id, args.name, payload)
    data = {"id": args.id, "signal": args.name, "woke": woke}
    note = "woke the job: it runs at the next tick" if woke else "kept for the job's wait_for"
    emit(args, data, lambda: out.print(f"signal {args.name!r} sent to {args.id}: {note}"))
    return 0


def durable_table(view: DurableView) -> Table | None:
    """Steps, wait and resumes of one job for `tickq show`; None for a job without any."""
    if not (view.steps or view.signals or view.wait or view.resumes or view.tries):
        return None
    table = Table(title=f"durable steps ({len(view.steps)} stored, resumed {view.resumes}x)")
    for column in ("step", "finished at", "result bytes"):
        table.add_column(column)
    for step in view.steps[-SHOWN_STEPS:]:
        table.add_row(step["name"], str(step["finished_at"]), str(step["size"]))
    captions = []
    if len(view.steps) > SHOWN_STEPS:
        captions.append(f"the last {SHOWN_STEPS} of {len(view.steps)} steps (--json for all)")
    if view.wait is not None:
        captions.append(f"waiting: {view.wait.describe()}")
    if view.code_version:
        captions.append(f"last ran under code {view.code_version}")
    if view.signals:
        captions.append("signals: " + ", ".join(s["name"] for s in view.signals))
    shown = view.to_dict()
    for step in shown["retrying_steps"]:
        captions.append(f"step {step['name']!r} tried {step['tries']}x: {step['error']}")
    if shown["compensation"] is not None:
        undone = ", ".join(u["name"] for u in shown["undone"] if u["undone_at"]) or "nothing"
        captions.append(f"compensating ({shown['compensation']['ends']}); undone: {undone}")
    for child in view.children:
        captions.append(
            f"step {child['step']!r}: {child['ended']} of {child['children']} children ended"
        )
    table.caption = "; ".join(captions) or None
    return table


def show_data(job: dict[str, Any], view: DurableView) -> dict[str, Any]:
    return {**job, **view.to_dict()}


def register(command: Command) -> None:
    """Add `tickq signal` through cli.build_parser's `command` factory."""
    p = command(
        "signal",
        cmd_signal,
        "send a named signal to a job (its job.wait_for(NAME) returns the payload)",
        "  tickq signal 0192f4c3-... approve --payload '{\"ok\": true}'\n"
        "  tickq signal 0192f4c3-... go                 no payload (null)",
    )
    p.add_argument("id", metavar="ID")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--payload", help="any JSON value, or @file.json (default null)")
