"""`tickq flow`: limits per flow key prefix and holds on keys (queue_core/model/flow.py).

`main.build_parser` registers it; it shares `common`'s database session, rendering and
exit codes.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rich.table import Table

from queue_core.model import flow
from queue_core.policies.flow_limits import FlowLimits
from queue_core.policies.limits import parse_rate
from tickq.infra.cli.common import database, emit, out, positive

Command = Callable[[str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


def cmd_flow(args: argparse.Namespace) -> int:
    data: dict[str, Any]
    with database() as conn:
        limits = FlowLimits(conn)
        if args.action == "set":
            rate = parse_rate(args.rate) if args.rate else None
            limit = flow.flow_limit(args.prefix, max_running=args.max_running, rate=rate)
            data = limits.set(limit).to_dict()
        elif args.action == "clear":
            limits.clear(args.prefix)
            data = {"cleared": args.prefix}
        elif args.action == "hold":
            until = limits.hold(args.key, args.seconds)
            data = {"key": args.key, "held_until": until.isoformat()}
        else:
            data = {
                "limits": [limit.to_dict() for limit in limits.limits()],
                "keys": [
                    {**row, "held_until": _time(row["held_until"])} for row in limits.keys_now()
                ],
            }
    emit(args, data, lambda: out.print(_shown(args.action, data)))
    return 0


def _time(value: Any) -> str | None:
    return None if value is None else value.isoformat()


def _shown(action: str, data: dict[str, Any]) -> Any:
    if action == "clear":
        return f"cleared the flow limits of {data['cleared']}"
    if action == "hold":
        return f"held {data['key']} until {data['held_until']}"
    if action == "set":
        return _limits_table([data])
    limits = _limits_table(data["limits"])
    keys = Table(title="flow keys with jobs now")
    for column in ("key", "prefix", "running", "waiting", "held until"):
        keys.add_column(column)
    for row in data["keys"]:
        keys.add_row(
            row["key"],
            row["prefix"] or "-",
            str(row["running"]),
            str(row["waiting"]),
            row["held_until"] or "-",
        )
    grid = Table.grid()
    grid.add_row(limits)
    grid.add_row(keys)
    return grid


def _limits_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="flow limits (each key of a prefix on its own)")
    for column in ("prefix", "max running per key", "rate per key"):
        table.add_column(column)
    for row in rows:
        rate = (
            "-"
            if row["rate_limit"] is None
            else f"{row['rate_limit']}/{row['rate_period_seconds']:g}s"
        )
        table.add_row(row["prefix"], str(row["max_running"] or "-"), rate)
    return table


def register(command: Command) -> None:
    """Add `tickq flow` through cli.build_parser's `command` factory."""
    p = command(
        "flow", cmd_flow, "limits per flow key prefix (running and rate per key) and key holds"
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, help: str) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=help, description=help)
        # SUPPRESS: the action's default must not undo `tickq --json flow list`.
        sub.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
        )
        return sub

    a = action("set", "limit each key of a prefix (the longest limited prefix governs a key)")
    a.add_argument("prefix", help="key prefix, e.g. shop: or openai:")
    a.add_argument("--max-running", type=positive, help="at most K jobs of each key running")
    a.add_argument("--rate", help="at most N starts of each key per period: 5/s, 100/min, 10/30s")
    action("list", "list flow limits, and the keys with jobs now (running, waiting, held)")
    action("clear", "remove a prefix's flow limits").add_argument("prefix")
    a = action("hold", "keep every job of one key from starting for a while (at most a day)")
    a.add_argument("key")
    a.add_argument("--seconds", type=float, required=True, help="at most 86400 (a day)")
