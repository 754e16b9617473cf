"""On this machine: `tickq serve`, `invoke` and `demo`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from uuid import UUID

from rich.table import Table
from rich.tree import Tree

from queue_core import migrate as migrations
from queue_core.config import Settings
from queue_core.errors import ConfigurationError
from queue_core.model.job_batch import JobBatch
from queue_core.model.jobs import TERMINAL, Status
from queue_core.postgres import PostgresStore, StepStore
from queue_core.runner.runner import Runner, TickReport
from queue_core.store.port import Store
from tickq.infra import extras
from tickq.infra.cli.common import (
    EXIT_REFUSED,
    UsageError,
    database,
    emit,
    err,
    int_arg,
    json_arg,
    out,
    styled_status,
)
from tickq.infra.local import demo, serve
from tickq.infra.local import invoke as local_invoke


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
                styled_status(job.status.value),
                job.attempts_label,
                detail or "",
            )
        out.print(table)
        for job in jobs:
            if job.status == Status.DEAD:
                out.print(f"[bold red]dead letter[/] {job.id} ({job.type}): {job.error}")
        out.print(tree)
        for parent in (j for j in jobs if spawned.get(j.id)):
            out.print(
                f"workflow: {parent.type} …{str(parent.id)[-8:]}"
                f" {styled_status(parent.status.value)}"
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
        return f"{type_} …{str(id_)[-8:]} {styled_status(status.value)}"

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


def _port(raw: str) -> int:
    value = int_arg(raw)
    if not 0 <= value <= 65_535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {value}")
    return value


def register(command: Any) -> None:
    """Add the dev verbs through program.build_parser's `command` factory."""
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
