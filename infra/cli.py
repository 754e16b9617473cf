"""The `tickq` command line: human tables by default, `--json` for machines.

Exit codes: 0 success, 1 the operation was refused (unknown job, wrong state, lease lost),
2 bad input or configuration, 3 the database failed or could not be reached.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from queue_core import catalog, dependencies
from queue_core import migrate as migrations
from queue_core.batch import JobBatch
from queue_core.config import Settings
from queue_core.dependencies import Relative
from queue_core.errors import ConfigurationError, DatabaseError, InvalidJob, TickqError
from queue_core.fairness import GroupStats
from queue_core.jobs import TERMINAL, Job, Status
from queue_core.ports import StatsRow, Store
from queue_core.postgres import PostgresStore, StepStore
from queue_core.postgres import catalog as task_catalog
from queue_core.registry import Registry
from queue_core.tick import Runner, TickReport
from queue_core.transitions import compensating

from . import (
    cli_console,
    cli_db,
    cli_deploy,
    cli_events,
    cli_flow,
    cli_policies,
    cli_steps,
    demo,
    extras,
    init_app,
    local_invoke,
    serve,
)
from .cli_common import (
    EXIT_DATABASE,
    EXIT_INPUT,
    EXIT_REFUSED,
    EXIT_RESTART,
    UsageError,
    database,
    database_url,
    emit,
    err,
    json_arg,
    load_registry,
    open_connection,
    out,
    positive,
    time_arg,
    when,
)

# Rendering


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


def _status(value: str) -> str:
    return f"[{STATUS_STYLE.get(value, '')}]{value}[/]"


def _state(job: Job) -> str:
    """A list's status column: a suspended job (queued with a wait) says what it waits for,
    as it is not runnable until then."""
    if job.is_suspended:
        return f"{_status('suspended')} ({job.wait_kind})"
    return _status(job.status.value)


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
            f"{job.attempts}/{job.max_attempts}",
            str(job.priority),
            when(job.created_at),
            (job.standing_error or "")[:80],
        )
    return table


def report_table(report: TickReport) -> Table:
    table = Table(title="tick")
    data = report.as_dict()
    data.pop("dead_letters")
    for key in data:
        table.add_column(key)
    table.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in data.values()))
    return table


# Commands


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
            out.print(f"{r.id} {_status(r.status.value)}{note}")

    emit(args, rows if args.count > 1 else rows[0], human)
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
    from .progress import WorkStatus, live_status

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
            table.add_row(key, _status(shown) if key in ("status", "state") else shown)
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
    return f"{r.id} {r.type} {_status(r.status.value)}"


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
            out.print(f"{job.id} {_status(job.status.value)}{note}")

    emit(args, [{**j.to_dict(), "compensating": compensating(j)} for j in jobs], human)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from queue_core.pauses import QueuePauses

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
        table.add_row(r.queue, r.type, _status(r.status.value), count, age)
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


def cmd_demo(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    owner = _demo_owner(args.user)
    with database(throwaway=not (Settings.from_env().database_url or args.keep)) as conn:
        migrations.migrate(conn)
        store = PostgresStore(conn)
        specs = [demo.demo.spec(**r, user_id=owner) for r in demo.requests()]
        results = store.enqueue_many(specs)
        graph = [demo.demo.spec(**_without(r, "after"), user_id=owner) for r in demo.pipeline()]
        after = [tuple(r.get("after", ())) for r in demo.pipeline()]
        steps = [r.id for r in store.enqueue_after(JobBatch.of(graph), after)]
        ids = list(dict.fromkeys([*(r.id for r in results), *steps]))
        duplicates = sum(r.duplicate for r in results)
        if not args.json:
            out.print(
                f"enqueued {len(results)} requests as {len(ids)} jobs "
                f"({duplicates} deduplicated by idempotency key)"
            )
        tick_ends = [0.0]  # each tick plays an invocation of demo.TICK_SECONDS
        runner = Runner(
            store,
            demo.demo,
            batch_size=4,
            concurrency=4,
            lease_seconds=30,
            time_left=lambda: tick_ends[0] - time.monotonic(),
        )
        total = TickReport()
        ticks = 0
        deadline = time.monotonic() + 60
        with runner, Progress(transient=True, disable=args.json) as progress:
            bar = progress.add_task("running ticks", total=len(ids))
            while time.monotonic() < deadline:
                tick_ends[0] = time.monotonic() + demo.TICK_SECONDS
                total.add(runner.tick(should_continue=lambda: tick_ends[0] > time.monotonic()))
                ticks += 1
                demo.approve_waiting(store, ids)
                jobs = [store.get(i) for i in ids]
                finished = sum(j.status in TERMINAL for j in jobs)
                progress.update(bar, completed=finished)
                if finished == len(ids):
                    break
                time.sleep(0.1)
        # The children a workflow step spawned are jobs of the demo too, in the order made.
        spawned = {
            i: sorted(r.id for r in store.relatives(i) if r.relation == "spawned") for i in ids
        }
        jobs = [store.get(i) for i in [*ids, *(c for cs in spawned.values() for c in cs)]]
        resumes = {i: StepStore(store).show(i).resumes for i, cs in spawned.items() if cs}
        tree = _pipeline_tree(store, steps[0])

    def human() -> None:
        table = Table(title="demo outcomes")
        for column in ("type", "payload", "status", "attempts", "result / error"):
            table.add_column(column, overflow="fold")
        for job in jobs:
            detail = job.error if job.status == Status.DEAD else json.dumps(job.result)
            table.add_row(
                job.type,
                json.dumps(job.payload),
                _status(job.status.value),
                f"{job.attempts}/{job.max_attempts}",
                detail or "",
            )
        out.print(table)
        for job in jobs:
            if job.status == Status.DEAD:
                out.print(f"[bold red]dead letter[/] {job.id} ({job.type}): {job.error}")
        out.print(tree)
        for parent in (j for j in jobs if spawned.get(j.id)):
            out.print(
                f"workflow: {parent.type} …{str(parent.id)[-8:]} {_status(parent.status.value)}"
                f" after the {len(spawned[parent.id])} child jobs it mapped (at most 2"
                f" runnable at once): resumed {resumes[parent.id]} time(s), with their"
                " results in order"
            )
        out.print(
            f"{ticks} ticks ran {total.batches} batches: {total.succeeded} succeeded, "
            f"{total.retried} retried, {total.snoozed} snoozed, {total.dead} dead"
        )
        out.print(
            f"durable steps: {total.steps} stored, {total.suspended} suspensions "
            f"(ticks of {demo.TICK_SECONDS:g} s, an approval signal), {total.resumed} resumes"
        )

    emit(args, {"jobs": [j.to_dict() for j in jobs], "report": total.as_dict()}, human)
    unfinished = [j for j in jobs if j.status not in TERMINAL]
    return EXIT_REFUSED if unfinished else 0


def _without(request: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in request.items() if k != key}


def _pipeline_tree(store: Store, root: UUID) -> Tree:
    """The demo pipeline as a tree from its first job: each job with its children under it
    (a job after several parents shows under each of them)."""

    def label(id_: UUID, type_: str, status: Status) -> str:
        return f"{type_} …{str(id_)[-8:]} {_status(status.value)}"

    first = store.get(root)
    tree = Tree(f"pipeline: {label(first.id, first.type, first.status)}")
    frontier = [(tree, first.id)]
    while frontier:
        node, job_id = frontier.pop(0)
        for r in store.relatives(job_id):
            if r.relation == "child":
                frontier.append((node.add(label(r.id, r.type, r.status)), r.id))
    return tree


def _demo_owner(user: str | None) -> UUID | None:
    """The owner id `tickq serve --user` signs in as, so the page shows the demo's jobs."""
    if user is None:
        return None
    try:
        return serve.DevIdentity(serve.parse_user(user)).owner_id()
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def cmd_serve(args: argparse.Namespace) -> int:
    extras.require("tickq serve", "aws_lambda_powertools", "pydantic")
    try:
        user = serve.parse_user(args.user)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    group = serve.operator_group(os.environ) if args.operator else None
    identity = serve.DevIdentity(user, operator_group=group)
    with database() as conn:
        try:
            serve.run(
                conn,
                database_url=Settings.from_env().database_url,
                host=args.host,
                port=args.port,
                identity=identity,
                role=args.role or None,
                say=lambda line: err.print(line, markup=False),
            )
        except serve.ServeError as exc:
            raise ConfigurationError(str(exc)) from None
    return 0


def cmd_invoke(args: argparse.Namespace) -> int:
    """Run a template.yaml function's handler here, like `sam local invoke` minus Docker."""
    extras.require("tickq invoke", "yaml", "aws_lambda_powertools", "pydantic")
    event = json_arg(sys.stdin.read() if args.event == "-" else "@" + args.event, "--event")
    env = dict(_env_pair(pair) for pair in args.env or [])
    template = Path(args.template) if args.template else local_invoke.default_template()
    with ExitStack() as stack:
        if not (env.get("TICKQ_DATABASE_URL") or Settings.from_env().database_url):
            env["TICKQ_DATABASE_URL"] = stack.enter_context(database()).info.dsn
        try:
            run = local_invoke.invoke(args.function, event, template_path=template, env=env)
        except local_invoke.LocalInvokeError as exc:
            raise UsageError(str(exc)) from None
        except extras.MissingExtra:
            raise
        except Exception as exc:  # the handler's own failure, reported as Lambda reports it
            print(json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)}))
            return EXIT_REFUSED
    if run.config.unresolved:
        err.print(f"[dim]no local value for {', '.join(run.config.unresolved)}: left unset[/]")
    if run.timed_out:
        err.print(f"[yellow]ran {run.seconds:.1f} s, past the {run.config.timeout} s timeout[/]")
    print(json.dumps(run.result, default=str, indent=None if args.json else 2))
    return 0


def _env_pair(raw: str) -> tuple[str, str]:
    name, sep, value = raw.partition("=")
    if not sep or not name:
        raise UsageError(f"--env takes NAME=VALUE, got {raw!r}")
    return name, value


# Argument parsing


def _seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {raw!r}") from None
    if not 0 <= value <= 86_400 * 366:
        raise argparse.ArgumentTypeError(f"expected 0 to 31622400 seconds, got {raw}")
    return value


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


def _port(raw: str) -> int:
    value = _int(raw)
    if not 0 <= value <= 65_535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {value}")
    return value


def _int(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {raw!r}") from None


# Bulk retries go in chunks of this many jobs; bars appear for at least PROGRESS_THRESHOLD.
RETRY_CHUNK = 100
PROGRESS_THRESHOLD = 2
EXIT_CODES = (
    "exit codes: 0 ok, 1 refused (not found, wrong state), 2 bad input, 3 database error, "
    f"{EXIT_RESTART} restart (tickq work --exit-on-abandoned: handlers abandoned at their timeout)"
)
EXAMPLES = """\
examples:
  tickq demo                                  run the demo on a throwaway PostgreSQL
  tickq migrate                               create or upgrade the tickq schema
  tickq enqueue embed --payload '{"doc": 1}' --key doc-1
  tickq work --tasks myapp.tasks              run a worker until SIGTERM
  tickq jobs --status dead --type embed       list dead embed jobs
  tickq retry --dead --type embed             send them back to the queue

The database is TICKQ_DATABASE_URL; without it, the local PostgreSQL `tickq db start`
left running, else an embedded one for the command's own run.
exit codes: 0 ok, 1 refused (not found, wrong state), 2 bad input, 3 database error
"""


LIST_EXAMPLES = {
    "jobs": "  tickq jobs --status dead --type embed       dead embed jobs, newest first\n"
    "  tickq jobs --user 0192f4c3-... --limit 20   one user's jobs\n"
    "  tickq jobs --cursor <from the last page>    the next page",
    "dead": "  tickq dead                                  every dead letter\n"
    "  tickq dead --type embed --json              for scripts",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickq",
        description="A job queue in one PostgreSQL table.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        name: str, func: Callable[[argparse.Namespace], int], help: str, examples: str = ""
    ) -> Any:
        p = sub.add_parser(
            name,
            help=help,
            description=help,
            epilog=(f"examples:\n{examples}\n\n" if examples else "") + EXIT_CODES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        # SUPPRESS: a subcommand's default must not undo `tickq --json COMMAND`.
        p.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
        )
        p.set_defaults(func=func)
        return p

    def worker_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--tasks", nargs="*", help="handler modules (else TICKQ_TASK_MODULES)")
        p.add_argument("--queue", action="append", help="queue to claim from (repeatable)")
        p.add_argument("--batch-size", type=positive, help="jobs claimed per round trip")
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
    p.add_argument("--priority", type=_int, help="higher runs first")
    p.add_argument("--max-attempts", type=_int)
    p.add_argument("--timeout", type=_int, help="seconds the handler may run before it is stopped")
    p.add_argument(
        "--flow-key",
        dest="flow_keys",
        action="append",
        metavar="K",
        help="a flow key of the job (repeatable): limits per key prefix apply (tickq flow)",
    )
    p.add_argument("--delay", type=_seconds, help="seconds before it may run")
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
        type=_seconds,
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
    p.add_argument("--poll-interval", type=_seconds, default=1.0, help="idle sleep, seconds")
    p.add_argument("--max-seconds", type=_seconds, help="stop after this long")
    p.add_argument("--until-empty", action="store_true", help="stop when nothing is left")
    p.add_argument(
        "--exit-on-abandoned",
        action="store_true",
        help="past TICKQ_MAX_ABANDONED_HANDLERS, exit with code 75 for a supervisor to start "
        "it again, instead of starting afresh in place",
    )

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
    p.add_argument("--interval", type=_seconds, default=2.0, help="seconds between refreshes")
    p.add_argument("--count", type=positive, help="with --watch: stop after N refreshes")

    p = command(
        "serve",
        cmd_serve,
        "serve the HTTP API and the job list page locally, as API Gateway would",
        "  tickq serve --user alice                    the page at http://127.0.0.1:8000/ui\n"
        "  tickq serve --user alice --operator         also the operator view (all users)\n"
        "  tickq serve --user 0b9c...-uuid --port 0    any free port",
    )
    p.add_argument("--user", required=True, help="signed-in user: a UUID or a name")
    p.add_argument("--operator", action="store_true", help="make that user an operator")
    p.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="listen port; 0 picks a free one")
    p.add_argument(
        "--role",
        default="tickq_app",
        help="database role the API acts as (default tickq_app: row-level security on)",
    )
    p = command("invoke", cmd_invoke, "run a template.yaml function locally, without Docker")
    p.add_argument("function", metavar="FUNCTION_ID", help="logical id, e.g. TickFunction")
    p.add_argument("--event", required=True, help="event JSON file (- for stdin)")
    p.add_argument("--template", help="SAM template (default ./template.yaml)")
    p.add_argument("--env", action="append", metavar="NAME=VALUE", help="extra environment")
    p = command(
        "demo",
        cmd_demo,
        "run a realistic mix of jobs end to end",
        "  tickq demo                                  on a throwaway PostgreSQL\n"
        "  tickq demo --user alice --keep && tickq serve --user alice\n"
        "                                              then browse http://127.0.0.1:8000/ui",
    )
    p.add_argument("--user", help="owner of the demo jobs: a UUID or a name (see serve)")
    p.add_argument(
        "--keep",
        action="store_true",
        help="use the local database `tickq serve` uses, not a throwaway one",
    )

    cli_policies.register(command)
    cli_flow.register(command)
    cli_steps.register(command)
    cli_deploy.register(command)
    cli_events.register(command)
    cli_console.register(command)
    cli_db.register(command)
    init_app.register(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.json = bool(getattr(args, "json", False))
    # A command line of its own (not a call from Python): `tickq work` may start afresh in
    # place when it must be rid of handler threads.
    args.restartable = argv is None
    _configure_logging(quiet=args.command == "demo")
    # As under `python -m`, the current directory comes first on the import path, so
    # TICKQ_TASK_MODULES=myapp.tasks finds ./myapp (a console script starts in bin/).
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return int(args.func(args))
    except ModuleNotFoundError as exc:
        lacking = extras.missing(f"tickq {args.command}", exc)
        if lacking is None:
            raise
        return _fail(args, lacking, EXIT_INPUT)
    except (InvalidJob, UsageError, ConfigurationError) as exc:
        return _fail(args, exc, EXIT_INPUT)
    except DatabaseError as exc:
        hint = ""
        if "does not exist" in str(exc) and "tickq" in str(exc):
            hint = " (has `tickq migrate` run on this database?)"
        return _fail(args, exc, EXIT_DATABASE, hint)
    except TickqError as exc:
        return _fail(args, exc, EXIT_REFUSED)


def _configure_logging(*, quiet: bool) -> None:
    """Worker events (retries, expired leases, reconnects) go to stderr, one line each.

    Adds one handler (once per process) and leaves propagation alone, so an application
    or test harness that calls main() keeps its own logging.
    """
    level = os.environ.get("TICKQ_LOG_LEVEL", "ERROR" if quiet else "WARNING").upper()
    logger = logging.getLogger("tickq")
    handler = next((h for h in logger.handlers if isinstance(h.formatter, _LogFormat)), None)
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_LogFormat())
        logger.addHandler(handler)
    handler.setLevel(level if level in logging.getLevelNamesMapping() else "WARNING")
    if logger.level == logging.NOTSET or logger.level > handler.level:
        logger.setLevel(handler.level)


class _LogFormat(logging.Formatter):
    FIELDS = ("job_id", "job_type", "attempt", "status", "error")

    def format(self, record: logging.LogRecord) -> str:
        extra = " ".join(
            f"{k}={getattr(record, k)}" for k in self.FIELDS if getattr(record, k, None)
        )
        stamp = self.formatTime(record, "%H:%M:%S")
        line = f"{stamp} {record.levelname.lower()} {record.getMessage()} {extra}".rstrip()
        # A failure's cause (a 500 under tickq serve or tickq invoke): its traceback follows.
        if record.exc_info and record.exc_info[0] is not None:
            return f"{line}\n{self.formatException(record.exc_info)}"
        return line


def _fail(args: argparse.Namespace, exc: Exception, code: int, hint: str = "") -> int:
    if args.json:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc) + hint}))
    else:
        # Invalid UTF-8 from argv arrives as lone surrogates, which a strict stream cannot
        # encode (and a failed write leaves in rich's buffer for every later print).
        message = f"{exc}{hint}".encode("utf-8", "backslashreplace").decode("utf-8")
        # Escaped: a message's brackets (pip install 'tickq[aws]') are not markup.
        err.print(f"[red]error:[/] {escape(message)}", markup=True, highlight=False, soft_wrap=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
