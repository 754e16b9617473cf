"""Real login roles for the security tests: members of tickq_app and tickq_worker."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from uuid import UUID, uuid4

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

RoleConnect = Callable[[], psycopg.Connection]


def _login_role(database_url: str, member_of: str) -> Iterator[str]:
    """Create a LOGIN role in `member_of` (never a superuser); drop it afterwards."""
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
def app_url(database_url: str) -> Iterator[str]:
    yield from _login_role(database_url, "tickq_app")


@pytest.fixture(scope="session")
def worker_url(database_url: str) -> Iterator[str]:
    yield from _login_role(database_url, "tickq_worker")


def _factory(url: str) -> Iterator[RoleConnect]:
    opened: list[psycopg.Connection] = []

    def connect() -> psycopg.Connection:
        connection = psycopg.connect(url, autocommit=True)
        opened.append(connection)
        return connection

    yield connect
    for connection in opened:
        connection.close()


@pytest.fixture
def as_app(app_url: str, clean_tables: None) -> Iterator[RoleConnect]:
    """Connections logged in as an application role (row-level security applies)."""
    yield from _factory(app_url)


@pytest.fixture
def as_worker(worker_url: str, clean_tables: None) -> Iterator[RoleConnect]:
    yield from _factory(worker_url)


@pytest.fixture
def alice() -> UUID:
    return uuid4()


@pytest.fixture
def bob() -> UUID:
    return uuid4()


# The Lambda handler fixtures, for the HTTP API with two identities.
from tests.functions.conftest import (  # noqa: E402, F401  (fixtures are found by name)
    function_env,
    lambda_context,
    tasks,
)
