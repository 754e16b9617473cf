"""`tickq schedules`, `tickq limits`, `tickq retention` and `tickq prune`.

The verbs that manage standing policies rather than single jobs; `main.build_parser`
registers them, and they share `common`'s database session, rendering and exit codes.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rich.table import Table

from queue_core.model import catalog
from queue_core.policies import limits as limits_
from queue_core.policies import retention as retention_
from queue_core.policies.schedules import Missed, Schedules
from queue_core.postgres import PostgresStore
from tickq.infra.cli.common import (
    UsageError,
    database,
    emit,
    err,
    json_arg,
    load_registry,
    out,
    positive,
    time_arg,
)

Command = Callable[[str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


def _none(value: Any) -> str:
    return "" if value is None else str(value)


def _queue_depth(depth: int | None, per_owner: int | None) -> str:
    """A queue's depth bounds as one cell: 'N', 'N per owner', or both."""
    shown = [] if depth is None else [str(depth)]
    return ", ".join(shown + ([] if per_owner is None else [f"{per_owner} per owner"]))


# schedules


def cmd_schedules(args: argparse.Namespace) -> int:
    with database() as conn:
        schedules = Schedules(conn)
        if args.action == "run":
            report = schedules.run(now=time_arg(args.now) if args.now else None)
            emit(
                args,
                report.as_dict(),
                lambda: out.print(
                    f"{report.due} due: {report.fired} fired, {report.skipped} skipped, "
                    f"{report.passed_over} passed over missed occurrences, {report.busy} busy, "
                    f"{report.failed} failed"
                    + "".join(f"\n  {name}: {error}" for name, error in report.errors.items())
                ),
            )
            return 1 if report.failed else 0
        if args.action == "add":
            # The known types: the named modules' and the task catalogue's; a catalogue
            # that knows any type refuses a misspelt one, as an enqueue does.
            named = set(load_registry(args.tasks).names()) if args.tasks else set()
            known = named | set(PostgresStore(conn).task_catalog())
            changed = schedules.add(
                args.name,
                args.cron,
                args.type,
                json_arg(args.payload, "--payload"),
                timezone=args.tz,
                queue=args.queue,
                priority=args.priority,
                max_attempts=args.max_attempts,
                group=args.group,
                flow_keys=args.flow_keys,
                missed=args.missed,
                enabled=not args.disabled,
                replace=args.replace,
                known_types=known if known and not catalog.accepts_unknown_types() else None,
            )
        elif args.action in ("enable", "disable"):
            changed = getattr(schedules, args.action)(args.name)
        elif args.action == "remove":
            schedules.remove(args.name)
            emit(args, {"removed": args.name}, lambda: out.print(f"removed {args.name}"))
            return 0
        else:
            rows = schedules.all()
            emit(args, [s.as_dict() for s in rows], lambda: out.print(_schedules_table(rows)))
            return 0
    emit(args, changed.as_dict(), lambda: out.print(_schedules_table([changed])))
    return 0


def _schedules_table(rows: list[Any]) -> Table:
    table = Table(title="schedules")
    for column in (
        "name",
        "cron",
        "time zone",
        "type",
        "queue",
        "flow keys",
        "missed",
        "enabled",
        "last fired",
        "next",
    ):
        table.add_column(column, overflow="fold")
    for s in rows:
        table.add_row(
            s.name,
            s.cron,
            s.timezone,
            s.type,
            s.queue,
            " ".join(s.flow_keys) or "-",
            s.missed.value,
            "yes" if s.enabled else "[dim]no[/]",
            _none(s.last_fired and s.last_fired.astimezone(s.zone).isoformat()),
            s.next_at.astimezone(s.zone).isoformat() if s.enabled else "",
        )
    return table


# limits


def cmd_limits(args: argparse.Namespace) -> int:
    if args.action in ("set", "clear") and bool(args.type) == bool(args.queue):
        raise UsageError(f"limits {args.action}: give exactly one of --type and --queue")
    with database() as conn:
        store = limits_.Limits(conn)
        if args.action == "set":
            data = _set_limit(store, args)
        elif args.action == "clear":
            if args.type:
                store.clear_type(args.type)
            else:
                _clear_queue(store, args.queue)
            data = {"cleared": args.type or args.queue}
        else:
            types, queues = store.types(), store.queues()
            data = {
                "types": [t.as_dict() for t in types],
                "queues": [q.as_dict() for q in queues],
                "queue_groups": [q.as_dict() for q in store.queue_groups()],
            }
    emit(args, data, lambda: out.print(_limits_tables(data)))
    return 0


def _set_limit(store: limits_.Limits, args: argparse.Namespace) -> dict[str, Any]:
    per_group = args.max_running_per_group
    if args.queue:
        per_owner = args.max_depth_per_owner
        no_depth = args.max_depth is None and per_owner is None
        if (no_depth and per_group is None) or args.max_running or args.rate:
            raise UsageError(
                "a queue limit is --max-depth N, --max-depth-per-owner N and/or "
                "--max-running-per-group N (caps and rates are per type)"
            )
        # All validated before any is written.
        depth = (
            None
            if no_depth
            else limits_.queue_limit(
                args.queue, max_depth=args.max_depth, max_depth_per_owner=per_owner
            )
        )
        grouped = (
            None
            if per_group is None
            else limits_.queue_group_limit(args.queue, max_running_per_group=per_group)
        )
        data: dict[str, Any] = {}
        if depth is not None:
            data["queues"] = [store.set_queue(depth).as_dict()]
        if grouped is not None:
            data["queue_groups"] = [store.set_queue_group(grouped).as_dict()]
        return data
    if args.max_depth is not None or args.max_depth_per_owner is not None:
        raise UsageError("--max-depth and --max-depth-per-owner are per queue: use --queue")
    rate, period = limits_.parse_rate(args.rate) if args.rate else (None, None)
    typed = limits_.type_limit(
        args.type,
        max_running=args.max_running,
        rate_limit=rate,
        rate_period_seconds=period,
        max_running_per_group=per_group,
    )
    return {"types": [store.set_type(typed).as_dict()]}


def _clear_queue(store: limits_.Limits, queue: str) -> None:
    """Both limits of a queue (depth, cap per group); an error only if it had neither."""
    cleared = 0
    for clear in (store.clear_queue, store.clear_queue_group):
        try:
            clear(queue)
            cleared += 1
        except limits_.LimitNotFound:
            pass
    if not cleared:
        raise limits_.LimitNotFound("queue", queue)


def _limits_tables(data: dict[str, Any]) -> Any:
    if "cleared" in data:
        return f"cleared the limits of {data['cleared']}"
    table = Table(title="limits")
    for column in ("scope", "max running", "per group", "rate", "max depth", "now"):
        table.add_column(column)
    for t in data.get("types", []):
        rate = f"{t['rate_limit']}/{t['rate_period_seconds']:g}s" if t["rate_limit"] else ""
        table.add_row(
            f"type {t['type']}",
            _none(t["max_running"]),
            _none(t["max_running_per_group"]),
            rate,
            "",
            f"{t['running']} running",
        )
    for q in data.get("queues", []):
        table.add_row(
            f"queue {q['queue']}",
            "",
            "",
            "",
            _queue_depth(q["max_depth"], q["max_depth_per_owner"]),
            f"{q['waiting']} waiting",
        )
    for q in data.get("queue_groups", []):
        busiest = f"busiest group: {q['busiest_group_running']} running"
        table.add_row(f"queue {q['queue']}", "", str(q["max_running_per_group"]), "", "", busiest)
    return table


# retention and prune


def cmd_retention(args: argparse.Namespace) -> int:
    with database() as conn:
        store = retention_.Retention(conn)
        if args.action == "set":
            rule = retention_.policy(
                queue=args.queue,
                type=args.type,
                statuses=args.status,
                max_age=args.max_age,
                keep_last=args.keep_last,
            )
            rows = [store.set(rule)]
        elif args.action == "clear":
            store.clear(queue=args.queue, type=args.type)
            scope = retention_.RetentionPolicy(args.queue, args.type).scope
            emit(args, {"cleared": scope}, lambda: out.print(f"cleared the policy of {scope}"))
            return 0
        else:
            rows = store.policies()
    emit(args, [r.as_dict() for r in rows], lambda: out.print(_policies_table(rows)))
    return 0


def _policies_table(rows: list[retention_.RetentionPolicy]) -> Table:
    table = Table(title="retention policies (most specific first)")
    for column in ("scope", "statuses", "max age", "keep last"):
        table.add_column(column)
    for r in rows:
        age = "" if r.max_age_seconds is None else f"{r.max_age_seconds / 86_400:g} d"
        table.add_row(r.scope, ", ".join(r.statuses), age, _none(r.keep_last))
    return table


def cmd_prune(args: argparse.Namespace) -> int:
    from tickq.infra.cli.progress import progress_bar

    with database() as conn:
        retention = retention_.Retention(conn)
        shown = not args.dry_run and not args.json and err.is_terminal
        # The bar's total is what a dry run counts first; only worth it on a terminal.
        total = retention.prune(dry_run=True).deleted if shown else 0
        with progress_bar(err, "pruning", total, shown=shown and total > 0) as advance:
            report = retention.prune(
                dry_run=args.dry_run,
                batch_size=args.batch_size,
                max_batches=args.max_batches,
                on_batch=advance,
            )

    def human() -> None:
        verb = "would delete" if report.dry_run else "deleted"
        detail = ", ".join(f"{n} {s}" for s, n in sorted(report.by_status.items()))
        out.print(
            f"{verb} {report.deleted} jobs"
            + (f" ({detail})" if detail else "")
            + ("" if report.dry_run else f" in {report.batches} batches")
        )
        for scope, n in report.by_policy.items():
            out.print(f"  {scope}: {n}")
        if not report.complete:
            out.print("stopped at --max-batches; run again to continue")

    emit(args, report.as_dict(), human)
    return 0


# Parsers


def register(command: Command) -> None:
    """Add the policy verbs through cli.build_parser's `command` factory."""
    p = command(
        "schedules", cmd_schedules, "cron schedules: add, list, enable, disable, remove, run"
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, help: str) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=help, description=help)
        # SUPPRESS: the action's default must not undo `tickq --json schedules list`.
        sub.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
        )
        return sub

    a = action("add", "create a schedule (fires from its next occurrence on)")
    a.add_argument("name")
    a.add_argument("cron", help="5-field cron expression, e.g. '0 8 * * *'")
    a.add_argument("type", help="job type to enqueue")
    a.add_argument("--tz", default="UTC", help="IANA time zone, e.g. Asia/Tokyo")
    a.add_argument("--payload", help="JSON object, or @file.json")
    a.add_argument("--queue")
    a.add_argument("--priority", type=int)
    a.add_argument("--max-attempts", type=int)
    a.add_argument("--group", help="fairness group of the jobs it enqueues (default: shared)")
    a.add_argument(
        "--flow-key",
        dest="flow_keys",
        action="append",
        metavar="K",
        help="a flow key of every job it fires (repeatable), besides the task's templates",
    )
    a.add_argument(
        "--missed",
        choices=[m.value for m in Missed],
        default=Missed.LATEST.value,
        help="after downtime: fire the latest missed occurrence once, or skip it",
    )
    a.add_argument("--disabled", action="store_true", help="create switched off")
    a.add_argument("--replace", action="store_true", help="replace a schedule of this name")
    a.add_argument("--tasks", nargs="*", help="handler modules, to check the type exists")
    action("list", "list schedules")
    for name, help in (
        ("enable", "switch a schedule on"),
        ("disable", "switch it off"),
        ("remove", "delete a schedule"),
    ):
        action(name, help).add_argument("name")
    action("run", "enqueue due occurrences once (what SchedulerFunction does)").add_argument(
        "--now", help="ISO 8601 instant to run at instead of the database clock"
    )

    p = command(
        "limits", cmd_limits, "per-type caps and rates, caps per group, per-queue maximum depth"
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = action("set", "set the limits of one type or one queue")
    a.add_argument("--type")
    a.add_argument("--queue")
    a.add_argument("--max-running", type=positive, help="at most K of the type running")
    a.add_argument("--rate", help="at most N starts per period: 5/s, 100/min, 10/30s")
    a.add_argument(
        "--max-depth", type=positive, help="refuse enqueue beyond N waiting (parents' too)"
    )
    a.add_argument(
        "--max-depth-per-owner",
        type=positive,
        help="refuse an application user's enqueue beyond N of its live jobs in the queue",
    )
    a.add_argument(
        "--max-running-per-group",
        type=positive,
        help="at most N running in any one fairness group (of the type, or of the queue)",
    )
    action("list", "list limits with current usage")
    a = action("clear", "remove the limits of one type or one queue")
    a.add_argument("--type")
    a.add_argument("--queue")

    p = command("retention", cmd_retention, "retention policies for finished jobs")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, help in (
        ("set", "create or change the policy of a scope"),
        ("clear", "remove the policy of a scope"),
    ):
        a = action(name, help)
        a.add_argument("--queue", help="scope: this queue (default: any)")
        a.add_argument("--type", help="scope: this type (default: any)")
        if name == "set":
            a.add_argument("--max-age", help="delete finished longer ago: 30d, 12h, 90m")
            a.add_argument("--keep-last", type=int, help="keep the newest N in the scope")
            a.add_argument(
                "--status",
                action="append",
                choices=list(retention_.PRUNABLE),
                help="statuses it prunes (default succeeded, cancelled)",
            )
    action("list", "list policies")

    p = command("prune", cmd_prune, "delete finished jobs the retention policies let go")
    p.add_argument("--dry-run", action="store_true", help="count only, delete nothing")
    p.add_argument("--batch-size", type=positive, default=retention_.DEFAULT_BATCH_SIZE)
    p.add_argument("--max-batches", type=positive)
