"""Database fixtures: a real PostgreSQL per test session, a migrated database per worker.

`TICKQ_DATABASE_URL` selects an existing server (as a superuser able to create
databases); otherwise each pytest process (each xdist worker) starts its own
throwaway server. Tests get clean tables rather than a new database each, which
keeps integration tests fast; migration tests use `fresh_database_url`.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests.model import profiles  # noqa: F401  (loads the hypothesis profile for every test)

# OpenTelemetry stays off unless a test turns it on (tests/otel_sdk.py): its default, `auto`,
# would turn it on for every later test of a process once one test imported the SDK.
os.environ.setdefault("TICKQ_OTEL", "off")
from tickq.infra.local import postgres as localdb
from tickq.infra.local.postgres import (
    LocalPostgres,
    LocalPostgresError,
    create_database,
    drop_database,
)

Connect = Callable[[], psycopg.Connection]


def _unique_database_name(kind: str) -> str:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return f"tickq_{kind}_{worker}_{secrets.token_hex(4)}"


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """URL of a superuser connection to the server the tests run against."""
    external = os.environ.get("TICKQ_DATABASE_URL")
    if external:
        yield external
        return
    try:
        server = LocalPostgres().start()
    except LocalPostgresError as exc:
        pytest.fail(f"cannot start a local PostgreSQL: {exc}", pytrace=False)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def database_url(pg_admin_url: str) -> Iterator[str]:
    """A database created for this session with all migrations applied; dropped after."""
    from queue_core.migrate import migrate

    name = _unique_database_name("test")
    create_database(pg_admin_url, name)
    url = localdb.database_url(pg_admin_url, name)
    try:
        with psycopg.connect(url) as conn:
            migrate(conn)
        yield url
    finally:
        drop_database(pg_admin_url, name)


@pytest.fixture(scope="session")
def _cleaner(database_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        # A test that leaked a lock should fail the next test loudly, not hang the run.
        conn.execute("SET lock_timeout = '10s'")
        yield conn


@pytest.fixture
def clean_tables(_cleaner: psycopg.Connection) -> None:
    """Empty every tickq table except the migrator's records, before the test."""
    rows = _cleaner.execute(
        "SELECT tablename FROM pg_tables"
        " WHERE schemaname = 'tickq'"
        " AND tablename NOT IN ('schema_migrations', 'schema_functions')"
        " ORDER BY tablename"
    ).fetchall()
    if rows:
        tables = sql.SQL(", ").join(sql.Identifier("tickq", name) for (name,) in rows)
        _cleaner.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(tables))


@pytest.fixture
def conn(database_url: str, clean_tables: None) -> Iterator[psycopg.Connection]:
    """An autocommit connection to the migrated test database, with empty tables."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


@pytest.fixture
def connect(database_url: str, clean_tables: None) -> Iterator[Connect]:
    """Factory of extra autocommit connections (for races); all closed at teardown."""
    yield from connection_factory(database_url)


def connection_factory(url: str) -> Iterator[Connect]:
    """Yield a factory of autocommit connections to `url`; closes them all when resumed."""
    opened: list[psycopg.Connection] = []

    def factory() -> psycopg.Connection:
        connection = psycopg.connect(url, autocommit=True)
        opened.append(connection)
        return connection

    yield factory
    for connection in opened:
        connection.close()


@contextmanager
def scratch_database(admin_url: str, kind: str) -> Iterator[str]:
    """A brand-new empty (unmigrated) database on `admin_url`'s server, dropped after."""
    name = _unique_database_name(kind)
    create_database(admin_url, name)
    try:
        yield localdb.database_url(admin_url, name)
    finally:
        drop_database(admin_url, name)


@pytest.fixture
def fresh_database_url(pg_admin_url: str) -> Iterator[str]:
    """A brand-new empty (unmigrated) database for this test only."""
    with scratch_database(pg_admin_url, "fresh") as url:
        yield url


@pytest.fixture
def new_database(pg_admin_url: str) -> Iterator[Callable[[], str]]:
    """A factory of brand-new empty databases for this test, each dropped at teardown."""
    made: list[str] = []

    def make() -> str:
        name = _unique_database_name("new")
        create_database(pg_admin_url, name)
        made.append(name)
        return localdb.database_url(pg_admin_url, name)

    yield make
    for name in made:
        drop_database(pg_admin_url, name)


@pytest.fixture(autouse=True)
def _isolated_task_registry() -> Iterator[None]:
    """Handlers registered by one test (or an imported task module) never leak into the next:
    the process-wide registry refuses types it does not know once it knows any."""
    from queue_core.runner.registry import registry

    saved = dict(registry.tasks)
    try:
        yield
    finally:
        registry.tasks.clear()
        registry.tasks.update(saved)


@pytest.fixture(autouse=True)
def _isolated_task_catalogue(request: pytest.FixtureRequest) -> Iterator[None]:
    """The task catalogue a test's workers or ticks published never reaches the next test:
    once it knows any type, enqueues of others are refused (queue_core/model/catalog.py). Only
    for tests on the shared database, emptied after each, so a test that never touches the
    database starts none."""
    cleaner = None
    if "database_url" in request.fixturenames:
        cleaner = request.getfixturevalue("_cleaner")
    yield
    if cleaner is not None:
        cleaner.execute("delete from tickq.task_catalog")
    for name in ("functions.runtime", "tickq.functions.runtime"):  # the Lambdas' copy
        runtime = sys.modules.get(name)
        if runtime is not None:
            runtime._catalog.clear()


def _login_role(database_url: str, member_of: str) -> Iterator[str]:
    """A LOGIN role in `member_of`, never a superuser, under a unique name; dropped after.

    Roles are cluster-wide, hence the random suffix: parallel sessions share the server.
    """
    name = f"{member_of}_{secrets.token_hex(4)}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("create role {} login nosuperuser nobypassrls in role {}").format(
                sql.Identifier(name), sql.Identifier(member_of)
            )
        )
    try:
        yield make_conninfo(database_url, user=name)
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity where usename = %s",
                (name,),
            )
            admin.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def app_login_url(database_url: str) -> Iterator[str]:
    """A login of the application role: row-level security applies to it."""
    yield from _login_role(database_url, "tickq_app")


@pytest.fixture
def operator_url(database_url: str) -> Iterator[str]:
    """A login of the operator role: it may call the console's functions and read no row."""
    yield from _login_role(database_url, "tickq_operator")


@pytest.fixture(scope="session")
def worker_login_url(database_url: str) -> Iterator[str]:
    """A login of the worker role: sees every row."""
    yield from _login_role(database_url, "tickq_worker")


@pytest.fixture(autouse=True)
def _isolated_environment() -> Iterator[None]:
    """Settings a test's code writes into os.environ (the local server sets Powertools
    switches for its process, for instance) never reach the next test."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        if os.environ != saved:
            os.environ.clear()
            os.environ.update(saved)
