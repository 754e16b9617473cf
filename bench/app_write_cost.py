"""What the application login's write path costs: writes through SECURITY DEFINER functions
(tickq.enqueue_many, tickq.cancel) against the direct inserts and updates they replaced.

Two engines, each driving the schema its own migrations build: the tree at REF (`git
archive`, default: just before migration 0034) and this tree. Each side is a Python process
of its own whose import path starts at its tree, on a fresh database, with a login that is a
member of tickq_app. Rounds alternate between the sides (which goes first alternates) and
each times, in this order:

- worker bulk enqueue and worker single enqueue (the owner's connection, no user): plain
  jobs, which should pay nothing for the application's path;
- drain: a Runner claims and finishes the worker's jobs (a handler that does nothing);
- app single enqueue, app bulk enqueue and app cancel (the cancel of each single job): a
  user's store on the application login's autocommit connection.

Medians of operations (or jobs) per second; the ratio is this tree over REF, so above 1 this
tree is faster. Statements per operation are counted once per side, for a user's single
enqueue and cancel on a warm connection: the cursor's executes, and the transaction control
psycopg sends (BEGIN, COMMIT, SAVEPOINT, RELEASE, ROLLBACK).

    .venv/bin/python -m bench.app_write_cost [--before REF] [--rounds 5] [--jobs 10000]
                                             [--singles 1500] [--batch 100]

Uses --database-url or TICKQ_DATABASE_URL (a superuser able to create databases and roles),
else a throwaway local server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shlex
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from .dependencies_cost import tree_at
from .server import env_or_local_server, fresh_database, server_description

ROOT = Path(__file__).resolve().parents[1]
MIGRATION = "queue_core/migrations/0034_app_writes_through_functions.sql"

# The rows of the table, in order: (workload, unit of its rate).
WORKLOADS = (
    ("worker bulk enqueue", "jobs/s"),
    ("worker single enqueue", "ops/s"),
    ("drain (claim + finish)", "jobs/s"),
    ("app single enqueue", "ops/s"),
    ("app bulk enqueue", "jobs/s"),
    ("app cancel", "ops/s"),
)
COUNTED = ("app single enqueue", "app cancel")

# Builds one side's schema, run with its tree first on the import path; prints where
# queue_core came from, so the parent can check it was that tree's.
MIGRATE = """
import sys, psycopg, queue_core
from queue_core.migrate import migrate
with psycopg.connect(sys.argv[1]) as conn:
    migrate(conn)
print(queue_core.__file__, flush=True)
"""

# One side: run with its tree first on the import path, through the public API only. It
# prints "ready <queue_core.__file__>", then answers commands on stdin with one JSON line:
# "round JOBS SINGLES" (rates of every workload) and "count" (statements per operation).
SIDE = """
import json, sys, time
from uuid import uuid4
import psycopg
import queue_core
from queue_core import PostgresStore, Registry, Runner
from queue_core.model.validation import job_spec

owner_url, app_url, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
registry = Registry()
registry.task("work")(lambda job: None)
owner = psycopg.connect(owner_url, autocommit=True)
app = psycopg.connect(app_url, autocommit=True)
assert app.execute("select pg_has_role('tickq_app', 'MEMBER')").fetchone() == (True,)


def clean():
    # Every tickq table but the migrations' record, as the tests empty them: ids and keys
    # of earlier rounds do not grow the indexes a later round writes.
    rows = owner.execute(
        "select tablename from pg_tables where schemaname = 'tickq'"
        " and tablename <> 'schema_migrations' order by tablename"
    ).fetchall()
    names = ", ".join("tickq." + name for (name,) in rows)
    owner.execute(f"truncate {names} restart identity cascade")


def timed(found, name, count, run):
    began = time.perf_counter()
    run()
    found[name] = count / (time.perf_counter() - began)


def one_round(jobs, singles):
    clean()
    found = {}
    worker = PostgresStore(owner)
    plain = [job_spec("work", {"i": i}) for i in range(batch)]
    plain_one = [job_spec("work", {"i": i}) for i in range(singles)]
    batches = jobs // batch
    timed(found, "worker bulk enqueue", batches * batch,
          lambda: [worker.enqueue_many(plain) for _ in range(batches)])
    timed(found, "worker single enqueue", singles,
          lambda: [worker.enqueue(spec) for spec in plain_one])
    total = batches * batch + singles
    reports = []
    with Runner(worker, registry, batch_size=100) as runner:
        timed(found, "drain (claim + finish)", total,
              lambda: reports.append(runner.tick()))
    assert reports[0].succeeded == total, reports[0]
    user = uuid4()
    store = PostgresStore(app, user_id=user)
    mine = [job_spec("work", {"i": i}, user_id=user) for i in range(batch)]
    mine_one = [job_spec("work", {"i": i}, user_id=user) for i in range(singles)]
    ids = []
    timed(found, "app single enqueue", singles,
          lambda: ids.extend(store.enqueue(spec).id for spec in mine_one))
    made = []
    timed(found, "app bulk enqueue", batches * batch,
          lambda: [made.extend(store.enqueue_many(mine)) for _ in range(batches)])
    assert len(made) == batches * batch and len(set(ids)) == singles
    cancelled = []
    timed(found, "app cancel", singles,
          lambda: cancelled.extend(store.cancel(i).status for i in ids))
    assert set(cancelled) == {"cancelled"}, set(cancelled)
    return found


def text(query, conn):
    if isinstance(query, bytes):
        query = query.decode()
    elif not isinstance(query, str):
        query = query.as_string(conn)
    lines = [ln for ln in query.splitlines() if not ln.strip().startswith("--")]
    return " ".join(" ".join(lines).split())[:60]


class CountingCursor(psycopg.Cursor):
    def execute(self, query, params=None, **kwargs):
        self.connection.sent.append(("execute", text(query, self.connection)))
        return super().execute(query, params, **kwargs)

    def executemany(self, query, params_seq, **kwargs):
        self.connection.sent.append(("execute", text(query, self.connection)))
        return super().executemany(query, params_seq, **kwargs)


class CountingConnection(psycopg.Connection):
    sent = None

    def _exec_command(self, command, *args, **kwargs):
        self.sent.append(("transaction", text(command, self)))
        return super()._exec_command(command, *args, **kwargs)


def count():
    conn = CountingConnection.connect(app_url, autocommit=True, cursor_factory=CountingCursor)
    conn.sent = []
    user = uuid4()
    store = PostgresStore(conn, user_id=user)
    spec = job_spec("work", {"i": 0}, user_id=user)
    store.cancel(store.enqueue(spec).id)  # first calls: probes, caches
    found = {}
    conn.sent.clear()
    job = store.enqueue(spec)
    found["app single enqueue"] = list(conn.sent)
    conn.sent.clear()
    store.cancel(job.id)
    found["app cancel"] = list(conn.sent)
    conn.close()
    return found


print("ready", queue_core.__file__, flush=True)
for line in sys.stdin:
    command, *args = line.split()
    if command == "round":
        print(json.dumps(one_round(int(args[0]), int(args[1]))), flush=True)
    else:
        print(json.dumps(count()), flush=True)
"""


def before_commit() -> str:
    """The tree before the application's writes went through functions: the parent of the
    commit that added migration 0034, or HEAD while that migration is not yet committed."""
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", MIGRATION],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return f"{added[-1]}^" if added else "HEAD"


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def _inside(path: str, tree: Path) -> bool:
    return Path(path).resolve().is_relative_to(tree.resolve())


def migrate_at(tree: Path, url: str) -> str:
    """Build `url`'s schema with `tree`'s migrations, in a process that imports that tree's
    queue_core; returns the queue_core it imported."""
    done = subprocess.run(
        [sys.executable, "-c", MIGRATE, url],
        cwd=tree,
        env=_env(tree),
        check=True,
        capture_output=True,
        text=True,
    )
    imported = done.stdout.strip()
    if not _inside(imported, tree):
        raise RuntimeError(f"migrated with {imported}, not the tree at {tree}")
    return imported


@contextlib.contextmanager
def app_login(url: str) -> Iterator[str]:
    """A login role in tickq_app (never a superuser; roles are cluster-wide, hence the
    random name), yielding its URL; dropped afterwards."""
    name = f"bench_app_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("create role {} login nosuperuser nobypassrls in role tickq_app").format(
                sql.Identifier(name)
            )
        )
    try:
        yield make_conninfo(url, user=name)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity where usename = %s",
                (name,),
            )
            admin.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(name)))


class Side:
    """One engine in a process of its own, on its own database, answering commands."""

    def __init__(self, tree: Path, owner_url: str, app_url: str, batch: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", SIDE, owner_url, app_url, str(batch)],
            cwd=tree,
            env=_env(tree),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        ready, _, imported = self._line().partition(" ")
        if ready != "ready" or not _inside(imported, tree):
            raise RuntimeError(f"the side of {tree} did not start on its tree: {imported}")
        self.queue_core = imported

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line:
            raise RuntimeError(f"the side exited with {self.process.wait()}")
        return line

    def ask(self, command: str) -> Any:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return json.loads(self._line())

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def compare(
    admin: str, ref: str, *, jobs: int, singles: int, batch: int, rounds: int
) -> dict[str, Any]:
    """Both sides alive at once, taking turns round by round (who goes first swaps), so
    both see the same machine load and the ratio is about the write paths."""
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    with tree_at(ref) as before_tree, contextlib.ExitStack() as stack:
        sides: dict[str, Side] = {}
        for name, tree in (("before", before_tree), ("after", ROOT)):
            url = stack.enter_context(fresh_database(admin, f"app_write_{name}"))
            migrate_at(tree, url)
            app_url = stack.enter_context(app_login(url))
            sides[name] = Side(tree, url, app_url, batch)
            stack.callback(sides[name].close)
        counts = {name: side.ask("count") for name, side in sides.items()}
        for side in sides.values():
            side.ask(f"round {batch * 5} 50")  # warm caches and plans
        for n in range(rounds):
            for name in ("before", "after") if n % 2 == 0 else ("after", "before"):
                runs[name].append(sides[name].ask(f"round {jobs} {singles}"))
            print(f"round {n + 1} of {rounds} done", file=sys.stderr, flush=True)
        imported = {name: side.queue_core for name, side in sides.items()}
    median = {
        name: {w: statistics.median(r[w] for r in rs) for w, _ in WORKLOADS}
        for name, rs in runs.items()
    }
    return {
        "before": ref,
        "jobs": jobs // batch * batch,
        "singles": singles,
        "batch": batch,
        "rounds": rounds,
        "queue_core": imported,
        "per_round": runs,
        "median": median,
        "ratio_after_over_before": {
            w: median["after"][w] / median["before"][w] for w, _ in WORKLOADS
        },
        "statements": counts,
    }


def render(result: dict[str, Any], ref_label: str) -> str:
    """The table of medians and ratios, the per-round rates and the statement counts."""
    median, ratio = result["median"], result["ratio_after_over_before"]
    lines = [
        f"| workload | unit | before {ref_label} | after (this tree) | after ÷ before |",
        "|---|---|---|---|---|",
    ]
    for workload, unit in WORKLOADS:
        before, after = median["before"][workload], median["after"][workload]
        lines.append(
            f"| {workload} | {unit} | {before:.0f} | {after:.0f} | {ratio[workload]:.3f} |"
        )
    lines += [
        "",
        "after ÷ before is of rates: above 1 this tree is faster, below 1 it is slower.",
        "",
        "| per round | before | after |",
        "|---|---|---|",
    ]
    for workload, _ in WORKLOADS:
        rates = [
            ", ".join(f"{r[workload]:.0f}" for r in result["per_round"][name])
            for name in ("before", "after")
        ]
        lines.append(f"| {workload} | {rates[0]} | {rates[1]} |")
    lines += [
        "",
        "Statements per operation (a warm connection; executes are the cursor's, transaction",
        "commands are psycopg's BEGIN/COMMIT/SAVEPOINT/RELEASE/ROLLBACK):",
        "",
        "| operation | before: executes | before: transaction | after: executes"
        " | after: transaction |",
        "|---|---|---|---|---|",
    ]
    counts = result["statements"]
    for operation in COUNTED:
        cells = []
        for name in ("before", "after"):
            kinds = [kind for kind, _ in counts[name][operation]]
            cells += [str(kinds.count("execute")), str(kinds.count("transaction"))]
        lines.append(f"| {operation} | {' | '.join(cells)} |")
    for name in ("before", "after"):
        for operation in COUNTED:
            sent = " ; ".join(text for _, text in counts[name][operation])
            lines.append(f"{name}, {operation}: {sent}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.app_write_cost", description=__doc__)
    parser.add_argument("--before", help="git ref of the engine before (default: see above)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds to take medians over")
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per bulk enqueue")
    parser.add_argument("--singles", type=int, default=1500, help="single enqueues, cancels")
    parser.add_argument("--batch", type=int, default=100, help="jobs per enqueue_many")
    parser.add_argument("--database-url", default=os.environ.get("TICKQ_DATABASE_URL"))
    args = parser.parse_args(argv)
    if min(args.rounds, args.singles, args.batch) < 1 or args.jobs < args.batch:
        parser.error("--rounds, --singles and --batch must be positive, --jobs >= --batch")
    words = sys.argv[1:] if argv is None else argv
    python = Path(sys.executable)
    if python.is_relative_to(Path.cwd()):
        python = python.relative_to(Path.cwd())
    print("command:", shlex.join([str(python), "-m", "bench.app_write_cost", *words]))
    ref = args.before or before_commit()
    sha = _git("rev-parse", "--short", ref)
    dirty = " + uncommitted changes" if _git("status", "--porcelain", "--", "queue_core") else ""
    with contextlib.ExitStack() as stack:
        admin = args.database_url or stack.enter_context(env_or_local_server())
        server = server_description(admin)
        result = compare(
            admin, ref, jobs=args.jobs, singles=args.singles, batch=args.batch, rounds=args.rounds
        )
    head = _git("rev-parse", "--short", "HEAD")
    print(f"before: {ref} ({sha}); after: this tree, HEAD {head}{dirty}")
    print(f"queue_core imported: {json.dumps(result['queue_core'])}")
    print(f"server: {json.dumps(server)}")
    print(
        f"rounds {result['rounds']}, bulk {result['jobs']} jobs in batches of"
        f" {result['batch']}, {result['singles']} singles and cancels; medians:"
    )
    print()
    print(render(result, ref))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
