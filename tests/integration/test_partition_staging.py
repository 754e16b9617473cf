"""Migration 0014 staged: the finished jobs are copied while the queue runs, then a short swap.

Whatever the queue does during the copy (jobs enqueued, finished, cancelled, retried from
dead, deleted, the table truncated), the partitioned tickq.jobs afterwards holds exactly the
rows the old table held at the swap, each once, every finished one among the finished
partitions; and the schema is the one a fresh database gets.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from queue_core import PostgresStore, partition_staging, transitions
from queue_core.errors import InvalidTransition
from queue_core.migrate import available, migrate
from queue_core.validation import job_spec
from tests.model.profiles import budget
from tickq.infra import localdb
from tickq.infra.localdb import create_database, drop_database

FINISHED = ("succeeded", "dead", "cancelled")
OPS = ("enqueue", "finish", "kill", "cancel", "retry", "delete", "truncate")


def migrate_to_0013(url: str) -> None:
    with psycopg.connect(url) as conn:
        migrate(conn, through="0013")


def fill(url: str, finished: int, live: int, days: int = 5) -> None:
    """`finished` finished jobs over `days` days (of each final status in turn) and `live`
    queued ones, written as a database at 0013 holds them."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "insert into tickq.jobs (type, status, finished_at, errors)"
            " select 't', (array['succeeded', 'dead', 'cancelled'])[1 + g %% 3],"
            "  now() - (g %% %s) * interval '1 day' - g * interval '1 second',"
            "  case when g %% 3 = 1 then '[{\"error\": \"x\"}]'::jsonb else '[]' end"
            " from generate_series(1, %s) g",
            (days, finished),
        )
        conn.execute(
            "insert into tickq.jobs (type, idempotency_key)"
            " select 't', 'k' || g from generate_series(1, %s) g",
            (live,),
        )


def rows(conn: psycopg.Connection) -> list[dict[str, Any]]:
    return [r[0] for r in conn.execute("select to_jsonb(j) from tickq.jobs j order by j.id")]


def staging_left(conn: psycopg.Connection) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "select relname from pg_class where relnamespace = 'tickq'::regnamespace"
            " and relname like '%%0014%%'"
            " union all select proname from pg_proc"
            " where pronamespace = 'tickq'::regnamespace and proname like '%%0014%%'"
        )
    ]


@pytest.fixture
def new_database(pg_admin_url: str) -> Iterator[Any]:
    """A factory of fresh databases, each dropped at teardown."""
    made: list[str] = []

    def make() -> str:
        name = f"tickq_staging_{secrets.token_hex(4)}"
        create_database(pg_admin_url, name)
        made.append(name)
        return localdb.database_url(pg_admin_url, name)

    yield make
    for name in made:
        drop_database(pg_admin_url, name)


class Queue:
    """Changes made to the old table while its finished jobs are copied."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.store = PostgresStore(self.conn)

    def close(self) -> None:
        self.conn.close()

    def one(self, sql: str, index: int) -> Any:
        ids = [r[0] for r in self.conn.execute(sql)]
        return ids[index % len(ids)] if ids else None

    def apply(self, op: str, index: int) -> None:
        getattr(self, op)(index)

    def enqueue(self, index: int) -> None:
        self.store.enqueue(job_spec("t", idempotency_key=f"new{index}", max_attempts=1))

    def finish(self, index: int) -> None:
        for job in self.store.claim(limit=1 + index % 3):
            self.store.complete(job, {"i": index})

    def kill(self, index: int) -> None:
        jobs = self.store.claim(limit=1 + index % 3)
        self.store.finish([transitions.failed(job, "boom", permanent=True) for job in jobs])

    def cancel(self, index: int) -> None:
        if job_id := self.one("select id from tickq.jobs where status = 'queued'", index):
            self.store.cancel(job_id)

    def retry(self, index: int) -> None:
        sql = "select id from tickq.jobs where status in ('dead', 'cancelled')"
        # A job whose key is held again is refused and stays as it is, as it should.
        if (job_id := self.one(sql, index)) is not None:
            with contextlib.suppress(InvalidTransition):
                self.store.retry(job_id)

    def delete(self, index: int) -> None:
        sql = "select id from tickq.jobs where status in ('succeeded', 'dead', 'cancelled')"
        if (job_id := self.one(sql, index)) is not None:
            self.conn.execute("delete from tickq.jobs where id = %s", (job_id,))

    def truncate(self, index: int) -> None:
        self.conn.execute("truncate tickq.jobs cascade")


def migrate_while(url: str, ops: list[tuple[str, int]], batch_rows: int) -> list[dict[str, Any]]:
    """Migrate with `batch_rows` per batch, applying the next ops after each batch; returns
    the old table's rows as the last op left them (what the swap must keep)."""
    queue = Queue(url)
    pending = list(ops)
    expected = rows(queue.conn)

    def after_batch(copied: int) -> None:
        nonlocal expected
        for _ in range(min(3, len(pending))):
            queue.apply(*pending.pop(0))
        expected = rows(queue.conn)

    try:
        with psycopg.connect(url) as conn:
            applied = migrate(conn, batch_rows=batch_rows, progress=after_batch)
        assert applied == [m.version for m in available() if m.version >= "0014"]
    finally:
        queue.close()
    return expected


def check_moved(url: str, expected: list[dict[str, Any]]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        assert rows(conn) == expected
        (relkind,) = conn.execute(
            "select relkind from pg_class where oid = 'tickq.jobs'::regclass"
        ).fetchone()
        assert relkind == "p"
        misplaced = conn.execute(
            "select id, status, tableoid::regclass::text from tickq.jobs"
            " where (status in ('succeeded', 'dead', 'cancelled'))"
            "    <> (tableoid::regclass::text like 'tickq.jobs_done_%%')"
        ).fetchall()
        assert misplaced == []
        assert staging_left(conn) == []


@pytest.mark.parametrize("catch_up_rounds", [0, partition_staging.MAX_CATCH_UP_ROUNDS])
@budget(ci=12, long=120)
@given(
    finished=st.integers(0, 40),
    live=st.integers(0, 12),
    batch_rows=st.integers(1, 9),
    ops=st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 50)), max_size=30),
)
def test_the_swap_keeps_exactly_what_the_queue_left_during_the_copy(
    new_database: Any,
    monkeypatch: pytest.MonkeyPatch,
    catch_up_rounds: int,
    finished: int,
    live: int,
    batch_rows: int,
    ops: list[tuple[str, int]],
) -> None:
    # Given a database at 0013 with finished and live jobs
    url = new_database()
    migrate_to_0013(url)
    fill(url, finished, live)
    # (no catch-up before the swap: the swap catches up every change itself)
    monkeypatch.setattr(partition_staging, "MAX_CATCH_UP_ROUNDS", catch_up_rounds)

    # When it migrates while the queue changes between the batches of the copy
    expected = migrate_while(url, ops, batch_rows)

    # Then every row is as the queue left it, once, in the partition of its status
    check_moved(url, expected)


def test_every_kind_of_change_during_the_copy_is_kept(new_database: Any) -> None:
    url = new_database()
    migrate_to_0013(url)
    fill(url, finished=30, live=10)
    ops = [(op, i) for i in range(3) for op in OPS if op != "truncate"]

    expected = migrate_while(url, ops, batch_rows=4)

    check_moved(url, expected)
    assert {r["status"] for r in expected} >= {"queued", "succeeded", "dead", "cancelled"}


def test_a_truncate_during_the_copy_leaves_no_copy_behind(new_database: Any) -> None:
    url = new_database()
    migrate_to_0013(url)
    fill(url, finished=20, live=3)

    expected = migrate_while(url, [("truncate", 0), ("enqueue", 1)], batch_rows=5)

    check_moved(url, expected)
    assert len(expected) == 1


def schema(url: str) -> dict[str, list[Any]]:
    """What a migrated database's tickq schema is made of, by kind, named and defined."""
    queries = {
        "tables": "select c.relname, c.relkind, c.reloptions::text,"
        " pg_get_expr(c.relpartbound, c.oid), c.relrowsecurity, c.relforcerowsecurity,"
        " c.relacl::text from pg_class c where c.relnamespace = 'tickq'::regnamespace"
        " and c.relkind in ('r', 'p') and c.relname !~ '^jobs_done_[0-9]{8}$'",
        "columns": "select c.relname, a.attname, format_type(a.atttypid, a.atttypmod),"
        " a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attacl::text"
        " from pg_attribute a join pg_class c on c.oid = a.attrelid"
        " left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum"
        " where c.relnamespace = 'tickq'::regnamespace and c.relkind in ('r', 'p')"
        " and a.attnum > 0 and not a.attisdropped and c.relname !~ '^jobs_done_[0-9]{8}$'",
        "constraints": "select c.conrelid::regclass::text, c.conname,"
        " pg_get_constraintdef(c.oid) from pg_constraint c"
        " where c.connamespace = 'tickq'::regnamespace"
        " and c.conrelid::regclass::text !~ '^tickq.jobs_done_[0-9]{8}$'",
        "indexes": "select indexrelid::regclass::text, pg_get_indexdef(indexrelid)"
        " from pg_index i join pg_class c on c.oid = i.indrelid"
        " where c.relnamespace = 'tickq'::regnamespace"
        " and c.relname !~ '^jobs_done_[0-9]{8}$'",
        "triggers": "select tgrelid::regclass::text, tgname, pg_get_triggerdef(oid)"
        " from pg_trigger where not tgisinternal and tgrelid in"
        " (select oid from pg_class where relnamespace = 'tickq'::regnamespace"
        " and relname !~ '^jobs_done_[0-9]{8}$')",
        "policies": "select polrelid::regclass::text, polname, polcmd, polroles::text,"
        " pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid)"
        " from pg_policy",
        "functions": "select oid::regprocedure::text, md5(pg_get_functiondef(oid)),"
        " proacl::text from pg_proc where pronamespace = 'tickq'::regnamespace",
    }
    with psycopg.connect(url, autocommit=True) as conn:
        return {kind: sorted(conn.execute(sql).fetchall()) for kind, sql in queries.items()}


def test_a_staged_upgrade_ends_with_the_schema_of_a_fresh_database(new_database: Any) -> None:
    fresh = new_database()
    with psycopg.connect(fresh) as conn:
        migrate(conn)
    upgraded = new_database()
    migrate_to_0013(upgraded)
    fill(upgraded, finished=50, live=5)
    with psycopg.connect(upgraded) as conn:
        migrate(conn, batch_rows=7)

    assert schema(upgraded) == schema(fresh)


def test_the_swap_reads_no_finished_row(new_database: Any) -> None:
    # Attaching the copied table proves its partitions' constraints from their checks: the
    # swap's time does not grow with the finished jobs (PostgreSQL says so at DEBUG1).
    url = new_database()
    migrate_to_0013(url)
    fill(url, finished=100, live=2)
    notices: list[str] = []
    with psycopg.connect(url) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("set client_min_messages = debug1")
        conn.commit()
        migrate(conn, batch_rows=30)
    implied = {n.split('"')[1] for n in notices if "is implied by existing constraints" in n}
    verified = {n.split('"')[1] for n in notices if n.startswith("verifying table")}
    with psycopg.connect(url, autocommit=True) as conn:
        days = {r[0] for r in conn.execute("select name from tickq.jobs_day_partitions()")}
    assert len(days) >= 5
    # Every day partition was proved, none read; only the empty default one is read when a
    # new day partition is attached beside it.
    assert days | {"jobs_done_default"} <= implied, notices
    assert verified <= {"jobs_done_default"}, notices


def test_a_failed_staging_leaves_the_old_table_as_it_was(
    new_database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = new_database()
    migrate_to_0013(url)
    fill(url, finished=12, live=2)
    with psycopg.connect(url, autocommit=True) as conn:
        before = rows(conn)

    def stop(copied: int) -> None:
        raise KeyboardInterrupt("stopped during the copy")

    with psycopg.connect(url) as conn, pytest.raises(KeyboardInterrupt):
        migrate(conn, batch_rows=5, progress=stop)

    with psycopg.connect(url, autocommit=True) as conn:
        assert rows(conn) == before
        assert staging_left(conn) == []
        assert conn.execute(
            "select count(*) from pg_trigger where tgrelid = 'tickq.jobs'::regclass"
            " and tgname like 'jobs_0014%%'"
        ).fetchone() == (0,)
    with psycopg.connect(url) as conn:
        assert migrate(conn) == [m.version for m in available() if m.version >= "0014"]
    with psycopg.connect(url, autocommit=True) as conn:
        assert rows(conn) == before


def test_workers_keep_draining_through_a_staged_migration(new_database: Any) -> None:
    # Given a database at 0013 with finished jobs and a backlog, and a worker draining it
    url = new_database()
    migrate_to_0013(url)
    fill(url, finished=3000, live=600)
    errors: list[str] = []
    stop = threading.Event()
    done: list[str] = []

    def work() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            store = PostgresStore(conn)
            while not stop.is_set():
                try:
                    store.enqueue(job_spec("t"))
                    jobs = store.claim(limit=5)
                    store.finish([transitions.succeeded(j, None) for j in jobs])
                    done.extend(str(j.id) for j in jobs)
                except Exception as exc:  # recorded: the assertion names it
                    errors.append(f"{type(exc).__name__}: {exc}")

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    deadline = datetime.now(UTC) + timedelta(seconds=60)
    while len(done) < 50 and datetime.now(UTC) < deadline:
        stop.wait(0.01)

    # When it migrates in small batches
    with psycopg.connect(url) as conn:
        migrate(conn, batch_rows=200)
    mark = len(done)
    while len(done) < mark + 50 and datetime.now(UTC) < deadline:
        stop.wait(0.01)
    stop.set()
    worker.join(timeout=30)

    # Then the worker never failed and went on after the swap; every job it finished is
    # there, succeeded, once
    assert errors == []
    assert len(done) >= mark + 50
    with psycopg.connect(url, autocommit=True) as conn:
        found = dict(
            conn.execute(
                "select id::text, status from tickq.jobs where id = any(%s::uuid[])", (done,)
            ).fetchall()
        )
        (total, distinct) = conn.execute(
            "select count(*), count(distinct id) from tickq.jobs"
        ).fetchone()
    assert found == {job_id: "succeeded" for job_id in done}
    assert total == distinct


def test_two_migrators_at_once_stage_and_swap_once(new_database: Any) -> None:
    url = new_database()
    migrate_to_0013(url)
    fill(url, finished=400, live=20)
    with psycopg.connect(url, autocommit=True) as conn:
        before = rows(conn)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with psycopg.connect(url) as conn:
                results.append(migrate(conn, batch_rows=25))
        except BaseException as exc:  # recorded: the assertion names it
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    assert sorted(results) == [[], [m.version for m in available() if m.version >= "0014"]]
    check_moved(url, before)


KILLED_MIGRATOR = """
import os, signal, sys
import psycopg
from queue_core.migrate import migrate

def die(copied):
    os.kill(os.getpid(), signal.SIGKILL)

with psycopg.connect(sys.argv[1]) as conn:
    migrate(conn, batch_rows=5, progress=die)
"""


def test_a_migrator_killed_during_the_copy_leaves_a_copy_the_next_one_starts_over(
    new_database: Any,
) -> None:
    # Given a migrator SIGKILLed after its first batch: its triggers and copy stay behind
    url = new_database()
    migrate_to_0013(url)
    fill(url, finished=30, live=6)
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_MIGRATOR, url], capture_output=True, text=True, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with psycopg.connect(url, autocommit=True) as conn:
        assert "jobs_0014_changed" in staging_left(conn)

    # When the queue goes on meanwhile and the next migrator runs
    queue = Queue(url)
    try:
        for op, index in [("finish", 1), ("kill", 2), ("retry", 0), ("delete", 3), ("enqueue", 4)]:
            queue.apply(op, index)
        expected = rows(queue.conn)
    finally:
        queue.close()
    with psycopg.connect(url) as conn:
        assert migrate(conn, batch_rows=7) == [
            m.version for m in available() if m.version >= "0014"
        ]

    # Then it started over and kept exactly what the queue left
    check_moved(url, expected)
