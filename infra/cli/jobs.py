"""The job verbs: enqueue, jobs, dead, show, retry, cancel and stats."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from rich.table import Table

from queue_core.model import dependencies
from queue_core.model.dependencies import Relative
from queue_core.model.fairness import GroupStats
from queue_core.model.job_batch import JobBatch
from queue_core.model.jobs import Job, Status
from queue_core.model.transitions import compensating
from queue_core.postgres import PostgresStore, StepStore
from queue_core.store.port import StatsRow, Store
from tickq.infra.cli import steps as cli_steps
from tickq.infra.cli.common import (
    UsageError,
    database,
    emit,
    err,
    int_arg,
    json_arg,
    load_registry,
    out,
    positive,
    seconds_arg,
    styled_status,
    time_arg,
    when,
)


def _state(job: Job) -> str:
    """A list's status column: a suspended job (queued with a wait) says what it waits for,
    as it is not runnable until then."""
    if job.is_suspended:
        return f"{styled_status('suspended')} ({job.wait_kind})"
    return styled_status(job.status.value)


def jobs_table(jobs: Sequence[Job], title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False)
    for column in ("id", "type", "queue", "status", "attempts", "priority", "created", "error"):
        table.add_column(column, overflow="fold")
    for job in jobs:
        table.add_row(
            str(job.id),
            job.type,
            job.queue,
            _state(job),
            job.attempts_label,
            str(job.priority),
            when(job.created_at),
            (job.standing_error or "")[:80],
        )
    return table


def cmd_enqueue(args: argparse.Namespace) -> int:
    payload = json_arg(args.payload, "--payload")
    reg = load_registry(args.tasks)
    options = {
        "queue": args.queue,
        "idempotency_key": args.key,
        "priority": args.priority,
        "max_attempts": args.max_attempts,
        "timeout": args.timeout,
        "delay": args.delay,
        "run_after": time_arg(args.run_after) if args.run_after else None,
        "user_id": args.user,
        "group": args.group,
        "debounce": args.debounce,
        "throttle": args.throttle,
        "flow_keys": args.flow_keys,
    }
    parents = dependencies.parents(args.after)
    with database() as conn:
        store = PostgresStore(conn)
        # The task catalogue fills what neither the request nor a loaded module sets.
        catalogued = store.task_catalog() if reg.needs_catalog([args.type]) else None
        specs = [
            reg.spec(args.type, payload, catalog=catalogued, **options) for _ in range(args.count)
        ]
        if parents:
            results = store.enqueue_after(JobBatch.of(specs), [parents] * len(specs))
        else:
            results = store.enqueue_many(specs)
    rows = [r.to_dict() for r in results]
    why = "its throttle's window holds it" if args.throttle else "a live job holds this key"

    def human() -> None:
        for r in results:
            note = f" (duplicate: {why})" if r.duplicate else ""
            note += " (debounced: the key's waiting job took it)" if r.debounced else ""
            out.print(f"{r.id} {styled_status(r.status.value)}{note}")

    emit(args, rows if args.count > 1 else rows[0], human)
    return 0


def cmd_jobs(args: argparse.Namespace) -> int:
    with database() as conn:
        page = PostgresStore(conn).list_jobs(
            statuses=args.status,
            types=args.type,
            queues=args.queue,
            user_id=args.user,
            limit=args.limit,
            cursor=args.cursor,
        )

    def human() -> None:
        out.print(jobs_table(page.jobs))
        if page.next_cursor:
            out.print(f"more: --cursor {page.next_cursor}")

    emit(
        args,
        {"jobs": [j.to_dict() for j in page.jobs], "next_cursor": page.next_cursor},
        human,
    )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with database() as conn:
        store = PostgresStore(conn)
        job = store.get(args.id)
        relatives = store.relatives(job.id)
        durable = StepStore(store).show(job.id)
        gate = store.gate_of(job.id)
        waits_for = store.flow_waits_for(job.id)

    def human() -> None:
        table = Table(show_header=False, title=f"job {job.id}")
        table.add_column("field", style="bold")
        table.add_column("value", overflow="fold")
        for key, value in job.to_dict().items():
            shown = json.dumps(value) if isinstance(value, dict | list) else str(value)
            table.add_row(key, styled_status(shown) if key in ("status", "state") else shown)
        for relation, title in (
            ("parent", "after"),
            ("child", "children"),
            ("spawned_by", "spawned by"),
            ("spawned", "spawned"),
        ):
            lines = [_relative(r) for r in relatives if r.relation == relation]
            if lines:
                table.add_row(title, "\n".join(lines))
        if gate is not None:
            table.add_row(gate.kind, gate.summary)
        if waits_for is not None:
            table.add_row("waiting", f"held by flow key {waits_for}")
        handled = durable.handling()
        if handled:
            table.add_row("handler", "\n".join(handled))
        out.print(table)
        steps = cli_steps.durable_table(durable)
        if steps is not None:
            out.print(steps)

    data = {**job.to_dict(), **dependencies.family(relatives)}
    data["gate"] = None if gate is None else gate.to_dict()
    data["held_by_flow_key"] = waits_for
    emit(args, cli_steps.show_data(data, durable), human)
    return 0


def _relative(r: Relative) -> str:
    return f"{r.id} {r.type} {styled_status(r.status.value)}"


def cmd_dead(args: argparse.Namespace) -> int:
    args.status = ["dead"]
    args.user = None
    args.cursor = None
    return cmd_jobs(args)


def cmd_retry(args: argparse.Namespace) -> int:
    if bool(args.ids) == bool(args.dead):
        raise UsageError("give job ids, or --dead (with optional --type/--queue filters)")
    if args.fresh and args.dead:
        raise UsageError("--fresh takes job ids (it forgets each job's completed steps)")
    if args.from_step is not None and (args.dead or args.fresh):
        raise UsageError("--from-step takes job ids, without --fresh (it keeps earlier steps)")
    with database() as conn:
        store = PostgresStore(conn)
        if args.ids:
            with _progress(args, "retrying", len(args.ids)) as advance:
                jobs = []
                for job_id in args.ids:
                    jobs.append(
                        StepStore(store).retry(job_id, fresh=args.fresh, from_step=args.from_step)
                    )
                    advance(1)
        else:
            jobs = _retry_dead_in_chunks(args, store)
    emit(
        args,
        [j.to_dict() for j in jobs],
        lambda: out.print(f"{len(jobs)} job(s) back in the queue"),
    )
    return 0


def _retry_dead_in_chunks(args: argparse.Namespace, store: Store) -> list[Job]:
    """Retry matching dead jobs RETRY_CHUNK at a time, so the bar moves and each statement
    holds its row locks briefly; stops when a chunk finds nothing left to retry."""
    dead = sum(
        r.count
        for r in store.stats()
        if r.status == Status.DEAD
        and (not args.type or r.type in args.type)
        and (not args.queue or r.queue in args.queue)
    )
    total = min(dead, args.limit)
    jobs: list[Job] = []
    with _progress(args, "retrying dead jobs", total) as advance:
        while len(jobs) < total:
            chunk = store.retry_dead(
                types=args.type, queues=args.queue, limit=min(RETRY_CHUNK, total - len(jobs))
            )
            if not chunk:
                break
            jobs.extend(chunk)
            advance(len(chunk))
    return jobs


@contextmanager
def _progress(args: argparse.Namespace, label: str, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr, shown only on a terminal, for human output, and for
    enough work to be worth one."""
    from rich.progress import Progress

    shown = not args.json and err.is_terminal and total >= PROGRESS_THRESHOLD
    with Progress(console=err, transient=True, disable=not shown) as progress:
        task = progress.add_task(label, total=total)
        yield lambda n: progress.advance(task, n)


def cmd_cancel(args: argparse.Namespace) -> int:
    with database() as conn:
        store = PostgresStore(conn)
        jobs = [store.cancel(job_id) for job_id in args.ids]

    def human() -> None:
        for job in jobs:
            note = ""
            if job.cancel_requested:
                note = " (asked to stop at its next heartbeat)"
            elif compensating(job):
                note = " (compensating: its undos run, then it ends cancelled)"
            out.print(f"{job.id} {styled_status(job.status.value)}{note}")

    emit(args, [{**j.to_dict(), "compensating": compensating(j)} for j in jobs], human)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from queue_core.policies.pauses import QueuePauses

    with database() as conn:
        store = PostgresStore(conn)
        if args.by == "group":
            if args.watch:
                raise UsageError("stats --by group shows one snapshot (no --watch)")
            groups = store.group_stats()
            data = [g.as_dict() for g in groups]
            emit(args, data, lambda: out.print(group_stats_table(groups)))
            return 0
        if args.watch:
            return _watch_stats(args, store)
        rows = store.stats()
        paused = QueuePauses(conn).all()

    def human() -> None:
        out.print(_stats_table(rows))
        for p in paused:
            out.print(
                f"[yellow]queue {p.queue} is paused[/] by {p.paused_by} at {when(p.paused_at)}"
            )

    data = _stats_data(rows)
    names = {p.queue: p for p in paused}
    for row in data:
        row["paused"] = row["queue"] in names
    emit(args, data, human)
    return 0


def _watch_stats(args: argparse.Namespace, store: Store) -> int:
    """Redraw the stats every --interval seconds until Ctrl-C (or --count refreshes).

    On a terminal the table is redrawn in place; piped, each refresh is printed in turn,
    one JSON object per line with --json.
    """
    from rich.live import Live

    def snapshot() -> tuple[datetime, list[StatsRow]]:
        return store.now(), store.stats()

    refreshes = itertools.count(1) if args.count is None else iter(range(1, args.count + 1))
    try:
        if args.json or not out.is_terminal:
            for n in refreshes:
                at, rows = snapshot()
                if args.json:
                    print(json.dumps({"at": at.isoformat(), "stats": _stats_data(rows)}))
                    sys.stdout.flush()
                else:
                    out.print(_stats_table(rows, at))
                if n != args.count:
                    time.sleep(args.interval)
            return 0
        with Live(console=out, auto_refresh=False, transient=False) as live:
            for n in refreshes:
                at, rows = snapshot()
                live.update(_stats_table(rows, at), refresh=True)
                if n != args.count:
                    time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    return 0


def _stats_data(rows: Sequence[StatsRow]) -> list[dict[str, Any]]:
    return [
        {
            "queue": r.queue,
            "type": r.type,
            "status": r.status.value,
            "count": r.count,
            "suspended": r.suspended,
            "oldest_runnable_seconds": r.oldest_runnable_seconds,
        }
        for r in rows
    ]


def _stats_table(rows: Sequence[StatsRow], at: datetime | None = None) -> Table:
    title = "jobs by queue, type and status"
    table = Table(title=title if at is None else f"{title} at {when(at)}")
    for column in ("queue", "type", "status", "count", "oldest runnable"):
        table.add_column(column)
    for r in rows:
        age = "" if r.oldest_runnable_seconds is None else f"{r.oldest_runnable_seconds:.1f} s"
        # Suspended jobs are stored queued, but are not runnable: counted apart.
        count = f"{r.count} ({r.suspended} suspended)" if r.suspended else str(r.count)
        table.add_row(r.queue, r.type, styled_status(r.status.value), count, age)
    if not rows:
        table.caption = "no jobs"
    return table


def group_stats_table(groups: Sequence[GroupStats]) -> Table:
    table = Table(title="live jobs by queue and fairness group")
    for column in ("queue", "group", "waiting", "running", "oldest runnable"):
        table.add_column(column)
    for g in groups:
        age = "" if g.oldest_runnable_seconds is None else f"{g.oldest_runnable_seconds:.1f} s"
        table.add_row(g.queue, g.group or "(shared)", str(g.waiting), str(g.running), age)
    if not groups:
        table.caption = "no live jobs"
    return table


def _gate_arg(kind: str) -> Callable[[str], dict[str, Any]]:
    """KEY:SECONDS (and :MAX for a debounce) as the enqueue's debounce or throttle object.
    The numbers are the last fields, so a key may hold colons itself."""
    numbers = 2 if kind == "debounce" else 1

    def parse(raw: str) -> dict[str, Any]:
        parts = raw.split(":")
        for count in range(min(numbers, len(parts) - 1), 0, -1):
            key, tail = ":".join(parts[:-count]), parts[-count:]
            try:
                values = [float(part) for part in tail]
            except ValueError:
                continue
            return dict(zip(("key", "seconds", "max_seconds"), [key, *values], strict=False))
        shape = "KEY:SECONDS[:MAX]" if kind == "debounce" else "KEY:SECONDS"
        raise argparse.ArgumentTypeError(f"expected {shape}, got {raw!r}")

    return parse


# Bulk retries go in chunks of this many jobs; bars appear for at least PROGRESS_THRESHOLD.
RETRY_CHUNK = 100


PROGRESS_THRESHOLD = 2


LIST_EXAMPLES = {
    "jobs": "  tickq jobs --status dead --type embed       dead embed jobs, newest first\n"
    "  tickq jobs --user 0192f4c3-... --limit 20   one user's jobs\n"
    "  tickq jobs --cursor <from the last page>    the next page",
    "dead": "  tickq dead                                  every dead letter\n"
    "  tickq dead --type embed --json              for scripts",
}


def register(command: Any) -> None:
    """Add the jobs verbs through program.build_parser's `command` factory."""
    p = command(
        "enqueue",
        cmd_enqueue,
        "enqueue a job",
        "  tickq enqueue embed --payload '{\"doc\": 1}' --key doc-1\n"
        "  tickq enqueue reindex --payload @job.json --delay 60 --priority 5\n"
        "  tickq enqueue embed --count 1000 --queue bulk\n"
        "  tickq enqueue reindex --after 0192f4c3-... --after 0192f4c4-...\n"
        "  tickq enqueue reindex --debounce doc-1:30:300   # 30 s after the last, 300 s at most\n"
        "  tickq enqueue connector-sync --throttle tenant-7:60  # at most one a minute",
    )
    p.add_argument("type", help="job type (handler name)")
    p.add_argument("--payload", help="JSON object, or @file.json")
    p.add_argument("--queue")
    p.add_argument("--key", help="idempotency key")
    p.add_argument("--priority", type=int_arg, help="higher runs first")
    p.add_argument("--max-attempts", type=int_arg)
    p.add_argument(
        "--timeout", type=int_arg, help="seconds the handler may run before it is stopped"
    )
    p.add_argument(
        "--flow-key",
        dest="flow_keys",
        action="append",
        metavar="K",
        help="a flow key of the job (repeatable): limits per key prefix apply (tickq flow)",
    )
    p.add_argument("--delay", type=seconds_arg, help="seconds before it may run")
    p.add_argument("--run-after", help="ISO 8601 time before which it does not run")
    p.add_argument("--user", help="owner's user id (UUID)")
    p.add_argument("--group", help="fairness group (default: the owner, else one shared group)")
    p.add_argument("--count", type=positive, default=1, help="enqueue this many copies")
    p.add_argument(
        "--after",
        action="append",
        metavar="ID",
        help="run only after this job succeeds (repeatable); waits as status waiting",
    )
    p.add_argument(
        "--debounce",
        type=_gate_arg("debounce"),
        metavar="KEY:SECONDS[:MAX]",
        help="one job for a burst of this key: it runs SECONDS after the last enqueue, at most "
        "MAX after the first",
    )
    p.add_argument(
        "--throttle",
        type=_gate_arg("throttle"),
        metavar="KEY:SECONDS",
        help="at most one job of this key per SECONDS; inside the window, the existing job",
    )
    p.add_argument("--tasks", nargs="*", help="handler modules, for defaults and type checks")

    for name, func, help in (
        ("jobs", cmd_jobs, "list jobs, newest first"),
        ("dead", cmd_dead, "list dead letters"),
    ):
        p = command(name, func, help, LIST_EXAMPLES[name])
        if name == "jobs":
            p.add_argument("--status", action="append", help="filter (repeatable)")
            p.add_argument("--user", help="owner's user id")
            p.add_argument("--cursor", help="continue after a previous page")
        p.add_argument("--type", action="append", help="filter (repeatable)")
        p.add_argument("--queue", action="append", help="filter (repeatable)")
        p.add_argument("--limit", type=positive, default=50)

    p = command(
        "show",
        cmd_show,
        "show one job",
        "  tickq show 0192f4c3-...                     every field, error history included\n"
        "  tickq show 0192f4c3-... --json | jq .payload",
    )
    p.add_argument("id")

    p = command(
        "retry",
        cmd_retry,
        "send dead or cancelled jobs back to the queue",
        "  tickq retry 0192f4c3-... 0192f4c4-...       these jobs\n"
        "  tickq retry --dead --type embed             every dead embed job (progress bar)\n"
        "  tickq retry --dead --queue bulk --limit 500\n"
        "  tickq retry --fresh 0192f4c3-...            start over: forget completed steps",
    )
    p.add_argument("ids", nargs="*", metavar="ID")
    p.add_argument("--dead", action="store_true", help="retry dead jobs matching the filters")
    p.add_argument(
        "--fresh", action="store_true", help="forget completed steps: start over (with IDs)"
    )
    p.add_argument(
        "--from-step",
        metavar="NAME",
        help="forget step NAME and every step stored after it, keep the earlier ones (with IDs)",
    )
    p.add_argument("--type", action="append")
    p.add_argument("--queue", action="append")
    p.add_argument("--limit", type=positive, default=1000)

    p = command(
        "cancel",
        cmd_cancel,
        "cancel waiting jobs; ask running ones to stop",
        "  tickq cancel 0192f4c3-...                   queued/retrying: cancelled at once\n"
        "                                              running: stops at its next heartbeat\n"
        "                                              a saga with undos: compensating, runs\n"
        "                                              them, then ends cancelled",
    )
    p.add_argument("ids", nargs="+", metavar="ID")

    p = command(
        "stats",
        cmd_stats,
        "counts per queue, type and status",
        "  tickq stats                                 one snapshot\n"
        "  tickq stats --watch                         a live view, redrawn every 2 s\n"
        "  tickq stats --watch --json --interval 10    one JSON line every 10 s\n"
        "  tickq stats --by group                      waiting, running, oldest wait per group",
    )
    p.add_argument(
        "--by",
        choices=("type", "group"),
        default="type",
        help="group: per fairness group, jobs waiting and running and the oldest wait",
    )
    p.add_argument("--watch", action="store_true", help="keep refreshing until Ctrl-C")
    p.add_argument("--interval", type=seconds_arg, default=2.0, help="seconds between refreshes")
    p.add_argument("--count", type=positive, help="with --watch: stop after N refreshes")
