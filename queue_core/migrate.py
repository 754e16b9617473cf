"""The schema: a fresh database is built whole from the current-state SQL of queue_core/schema,
an existing one is brought up to date by the migrations after the baseline, applied once
each, in order, and by the function files whose text it has not yet applied
(docs/operations.md, "Upgrading"; the rule for changing the schema is in
docs/architecture.md).

A function's text lives in one file only, `schema/functions/<name>.sql`: migrations hold
tables, data, grants and drops, never a function. Like a repeatable migration, a function
file is applied again whenever its text differs from the text the database last applied,
recorded by digest in tickq.schema_functions. A function new to the database is made before
the migrations (so one may grant on it or name it in a trigger), with its body checked only
when it first runs; a changed one after them (so its body may use what they add).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable
from typing import Any

import psycopg

from queue_core.errors import SchemaError
from queue_core.policies import partitions

# Any stable 64-bit number; it serialises concurrent migrators across the whole cluster.
_LOCK_KEY = 0x7469636B71  # "tickq"

BASELINE = "0039_baseline"
"""The version a database built from the current-state files of this release is at, before
any later migration. It folds the unreleased migrations below."""

FOLDED = (
    "0017_baseline",
    "0018_keys_for_every_insert",
    "0019_tenancy_bounds",
    "0020_one_lease_rule",
    "0021_live_vacuum_bounds",
    "0022_tenant_turns",
    "0023_handler_semantics",
    "0024_debounce_and_throttle",
    "0025_durable_workflows",
    "0026_outbox_and_trace_context",
    "0027_operator_job_view",
    "0028_client_claim_seed",
    "0029_partition_attach_waits_for_finishes",
    "0030_undo_paths",
    "0031_column_bounds",
    "0032_app_gates",
    "0033_owner_capped_maps_and_brief_lists",
    "0034_app_writes_through_functions",
    "0035_no_row_stops_the_queue",
    "0036_task_catalog",
    "0037_counts_that_mean_what_they_say",
    "0038_timeouts",
)
"""The versions folded into the baseline. A database that recorded every one of them has the
baseline's schema exactly (a test compares the catalogs), so it is recorded as at the
baseline and only later migrations apply to it."""

SCHEMA_FILES = ("roles.sql", "tables.sql", "functions/", "triggers.sql", "policies.sql")
"""The current-state files in the order a fresh database applies them; each needs only what
comes before it. functions/ holds one file per SQL function, its CREATE and who may run it,
applied in name order (a SQL function's body is checked when it is created: one that calls
another needs it earlier)."""

Progress = Callable[[str], None]
"""Told each version just before it is applied (or recorded)."""


@dataclass(frozen=True, slots=True)
class Migration:
    version: str
    sql: str


def schema_files() -> list[tuple[str, str]]:
    """(path under queue_core/schema, text) of every current-state file, in applying order."""
    root = resources.files("queue_core") / "schema"
    found: list[tuple[str, str]] = []
    for name in SCHEMA_FILES:
        if name.endswith("/"):
            found += [(f"{name}{f.name}", _text(f)) for f in _sql_files(root / name.rstrip("/"))]
        else:
            found.append((name, _text(root / name)))
    return found


def available() -> list[Migration]:
    """The migrations after the baseline, in order."""
    folder = resources.files("queue_core") / "migrations"
    files = _sql_files(folder) if folder.is_dir() else []
    migrations = [Migration(f.name.removesuffix(".sql"), _text(f)) for f in files]
    for migration in migrations:
        if migration.version <= BASELINE:
            raise SchemaError(
                f"migration {migration.version} sorts before the baseline {BASELINE}:"
                " a migration's version must sort after every earlier one"
            )
    return migrations


def migrate(
    conn: psycopg.Connection[Any],
    *,
    through: str | None = None,
    progress: Progress | None = None,
) -> list[str]:
    """Bring the database up to date in one transaction; returns the versions recorded.

    A fresh database is built from the current-state files, which already hold every
    migration: it is recorded at the baseline and at each of them, and at each function
    file's text. A database at the last migration before the baseline (0038) is recorded at
    the baseline, then the later migrations apply, and every function file whose text it
    has not applied (their paths, `functions/<name>.sql`, follow the versions in what this
    returns). Any other database made by an unreleased tickq raises SchemaError, and
    nothing changes.

    `through` stops after the migrations whose version starts with it (or sorts before it):
    a database as an earlier release left it, for upgrade tests and benchmarks, whose
    functions are not brought up to date. It applies to existing databases only, since a
    fresh one is built whole.

    Safe to run from several processes at once: an advisory lock is taken before anything
    is read, so a second migrator waits, then finds the work done. Afterwards, on every run:
    today's and the next days' partitions of finished jobs (maintenance keeps them ahead),
    and the live partition's statistics, which a dump and restore does not carry.
    """
    with conn.transaction():
        conn.execute("select pg_advisory_lock(%s)", (_LOCK_KEY,))
    try:
        with conn.transaction():
            recorded = _bring_up_to_date(conn, through, progress)
        with conn.transaction():
            partitions.ensure(conn)
            conn.execute("select tickq.jobs_live_id_statistics()")
    finally:
        if not conn.closed:
            with conn.transaction():
                conn.execute("select pg_advisory_unlock(%s)", (_LOCK_KEY,))
    return recorded


def versions() -> list[str]:
    """Every version a database brought up to date records: the baseline, then each later
    migration in order (the last one is the schema's version)."""
    return [BASELINE, *(m.version for m in available())]


def pending(conn: psycopg.Connection[Any]) -> list[str]:
    """What migrate() would apply now, versions then function files (it raises what
    migrate() would raise)."""
    with conn.transaction():
        done = _done(conn)
        fresh = _is_fresh(conn, done)
        if fresh:
            return versions()
        applied = _applied_functions(conn)
    baseline = [] if BASELINE in done else [BASELINE]
    later = [m.version for m in available() if m.version not in done]
    return (
        baseline
        + later
        + [path for path, text in function_files() if applied.get(path) != _digest(text)]
    )


def function_files() -> list[tuple[str, str]]:
    """(path under queue_core/schema, text) of every function file, in applying order."""
    return [(name, text) for name, text in schema_files() if name.startswith("functions/")]


def _bring_up_to_date(
    conn: psycopg.Connection[Any], through: str | None, progress: Progress | None
) -> list[str]:
    done = _done(conn)
    later = available()
    if _is_fresh(conn, done):
        if through is not None and not all(_within(m.version, through) for m in later):
            raise SchemaError(
                f"through={through!r} on a fresh database: it is built whole from the"
                " current-state files, which hold every migration; migrate it fully, or"
                " start from a database at an earlier release"
            )
        _tell(progress, BASELINE)
        _build(conn)
        versions = [BASELINE, *(m.version for m in later)]
        _record(conn, versions)
        _record_functions(conn, function_files())
        return versions
    recorded: list[str] = []
    if BASELINE not in done:
        _tell(progress, BASELINE)
        _record(conn, [BASELINE])
        recorded.append(BASELINE)
    if through is None:
        _make_new_functions(conn)
    for migration in later:
        if migration.version in done or not _within(migration.version, through):
            continue
        _tell(progress, migration.version)
        _run(conn, migration.sql, f"migrations/{migration.version}.sql")
        _record(conn, [migration.version])
        recorded.append(migration.version)
    if through is None:
        recorded += _apply_changed_functions(conn, progress)
    return recorded


def _make_new_functions(conn: psycopg.Connection[Any]) -> None:
    """Make each function the database does not have yet, before the migrations, so that
    one may grant on it or name it in a trigger. Its body is checked when it first runs
    (it may read what the migrations add), and its file is applied again, checked, after
    them. One that cannot be made yet (its arguments or result name a type the migrations
    make) waits for that second pass."""
    have = _functions_present(conn)
    new = [(path, text) for path, text in function_files() if _function_of(path) not in have]
    if not new:
        return
    shown = conn.execute("show check_function_bodies").fetchone()
    before = shown[0] if shown else "on"
    conn.execute("select set_config('check_function_bodies', 'off', true)")
    try:
        for _path, text in new:
            try:
                with conn.transaction():
                    conn.execute(text.encode())
            except (psycopg.errors.UndefinedObject, psycopg.errors.UndefinedTable):
                continue
    finally:
        conn.execute("select set_config('check_function_bodies', %s, true)", (before,))


def _apply_changed_functions(conn: psycopg.Connection[Any], progress: Progress | None) -> list[str]:
    """Apply every function file whose text the database has not applied, or whose function
    it lacks (a migration dropped it); returns their paths. Records of files no longer
    shipped are let go (a migration dropped those)."""
    applied = _applied_functions(conn)
    have = _functions_present(conn)
    files = function_files()
    changed = [
        (path, text)
        for path, text in files
        if applied.get(path) != _digest(text) or _function_of(path) not in have
    ]
    for path, text in changed:
        _tell(progress, path)
        _run(conn, text, f"schema/{path}")
    _record_functions(conn, changed)
    conn.execute(
        "delete from tickq.schema_functions where file <> all(%s)", ([path for path, _ in files],)
    )
    return [path for path, _ in changed]


def _functions_present(conn: psycopg.Connection[Any]) -> set[str]:
    query = "select proname from pg_proc where pronamespace = 'tickq'::regnamespace"
    return {row[0] for row in conn.execute(query)}


def _applied_functions(conn: psycopg.Connection[Any]) -> dict[str, str]:
    exists = conn.execute("select to_regclass('tickq.schema_functions') is not null").fetchone()
    if not (exists and exists[0]):
        return {}
    return dict(conn.execute("select file, digest from tickq.schema_functions").fetchall())


def _record_functions(conn: psycopg.Connection[Any], files: list[tuple[str, str]]) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "insert into tickq.schema_functions (file, digest) values (%s, %s)"
            " on conflict (file) do update set digest = excluded.digest, applied_at = now()",
            [(path, _digest(text)) for path, text in files],
        )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _function_of(path: str) -> str:
    return path.removeprefix("functions/").removesuffix(".sql")


def _is_fresh(conn: psycopg.Connection[Any], done: set[str]) -> bool:
    """Whether the database is fresh (True) or at the baseline or 0038 (False); raises
    SchemaError for anything else."""
    if BASELINE in done:
        return False
    if not done:
        row = conn.execute("select to_regclass('tickq.jobs') is not null").fetchone()
        if row and row[0]:
            raise SchemaError(
                "schema tickq has a jobs table but no record of migrations"
                " (tickq.schema_migrations): it was not made by `tickq migrate`;"
                " nothing was changed"
            )
        return True
    missing = [v for v in FOLDED if v not in done]
    if not missing:
        return False
    reached = max((v for v in FOLDED if v in done), default=None)
    raise SchemaError(
        f"this database is at migration {reached or sorted(done)[-1]}, a version of tickq"
        " that was never released, and this tickq upgrades only databases at"
        f" {FOLDED[-1]} or later (missing: {', '.join(missing)}). Migrate it first with the"
        f" tickq that made it, up to {FOLDED[-1]}; or, if its jobs need not be kept,"
        " drop schema tickq and migrate again. Nothing was changed."
    )


def _build(conn: psycopg.Connection[Any]) -> None:
    for name, text in schema_files():
        _run(conn, text, f"schema/{name}")


def _run(conn: psycopg.Connection[Any], sql: str, file: str) -> None:
    try:
        conn.execute(sql.encode())
    except psycopg.Error as exc:
        exc.add_note(f"in queue_core/{file}")
        raise


def _record(conn: psycopg.Connection[Any], versions: list[str]) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "insert into tickq.schema_migrations (version) values (%s)",
            [(v,) for v in versions],
        )


def _done(conn: psycopg.Connection[Any]) -> set[str]:
    exists = conn.execute("select to_regclass('tickq.schema_migrations') is not null").fetchone()
    if not (exists and exists[0]):
        return set()
    return {row[0] for row in conn.execute("select version from tickq.schema_migrations")}


def _within(version: str, through: str | None) -> bool:
    return through is None or version <= through or version.startswith(through)


def _tell(progress: Progress | None, version: str) -> None:
    if progress is not None:
        progress(version)


def _sql_files(folder: Traversable) -> list[Traversable]:
    return sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)


def _text(file: Traversable) -> str:
    return file.read_text(encoding="utf-8")
