"""PgBouncer in transaction mode (pool smaller than the clients) in front of the session's
test server: the local stand-in for RDS Proxy. Skipped, saying why, where Debian's
`pgbouncer` is not installed (`.ci/run` installs it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from psycopg.conninfo import conninfo_to_dict

from tickq.infra.local.pgbouncer import LocalPgBouncer, PgBouncerError, pgbouncer_binary

POOL_SIZE = 3  # server connections per (login, database): fewer than the clients


@pytest.fixture(scope="session")
def pgbouncer(
    database_url: str, app_login_url: str, worker_login_url: str
) -> Iterator[LocalPgBouncer]:
    if pgbouncer_binary() is None:
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)")
    logins = [
        conninfo_to_dict(url).get("user") or "postgres"
        for url in (database_url, app_login_url, worker_login_url)
    ]
    try:
        pooler = LocalPgBouncer(database_url, logins, pool_size=POOL_SIZE).start()
    except PgBouncerError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield pooler
    finally:
        pooler.stop()


@pytest.fixture(scope="session")
def pooled_url(pgbouncer: LocalPgBouncer, database_url: str) -> str:
    """The test database as the superuser (the table owner), through the pooler."""
    return pgbouncer.url(database_url)


@pytest.fixture(scope="session")
def pooled_app_url(pgbouncer: LocalPgBouncer, app_login_url: str) -> str:
    return pgbouncer.url(app_login_url)


@pytest.fixture(scope="session")
def pooled_worker_url(pgbouncer: LocalPgBouncer, worker_login_url: str) -> str:
    return pgbouncer.url(worker_login_url)


# The Lambda handler fixtures.
from tests.functions.conftest import (  # noqa: E402, F401  (fixtures are found by name)
    function_env,
    lambda_context,
    tasks,
)
