"""Real login roles for the security tests: members of tickq_app and tickq_worker."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from uuid import UUID, uuid4

import psycopg
import pytest

from tests.conftest import connection_factory

RoleConnect = Callable[[], psycopg.Connection]


@pytest.fixture(scope="session")
def app_url(app_login_url: str) -> str:
    return app_login_url


@pytest.fixture(scope="session")
def worker_url(worker_login_url: str) -> str:
    return worker_login_url


@pytest.fixture
def as_app(app_url: str, clean_tables: None) -> Iterator[RoleConnect]:
    """Connections logged in as an application role (row-level security applies)."""
    yield from connection_factory(app_url)


@pytest.fixture
def as_worker(worker_url: str, clean_tables: None) -> Iterator[RoleConnect]:
    yield from connection_factory(worker_url)


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
