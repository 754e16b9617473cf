"""One database connection per Lambda execution environment, reused while it stays healthy.

Reads TICKQ_DATABASE_URL, or TICKQ_DB_SECRET_ARN naming a Secrets Manager secret in the
RDS format (host, port, username, password, dbname), fetched through Powertools and
cached for five minutes so a rotated password is picked up without a redeploy.

Nothing here pins an RDS Proxy connection beyond a transaction: no session SET, no
LISTEN, no advisory locks; TICKQ_PREPARE_THRESHOLD=off turns prepared statements off.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from queue_core import ConfigurationError, DatabaseError, PostgresStore
from queue_core.config import Settings

SECRET_MAX_AGE = 300
# A frozen execution environment may find its socket closed by the server or a proxy's idle
# timeout; after this many idle seconds the connection is pinged before it is handed out.
PING_AFTER_SECONDS = 30.0

_conn: psycopg.Connection[Any] | None = None
_source: str | None = None
_last_used = 0.0


def connection() -> psycopg.Connection[Any]:
    """The environment's connection: opened on first use, re-opened when closed or broken."""
    global _conn, _source, _last_used
    settings = Settings.from_env()
    source = settings.database_url or os.environ.get("TICKQ_DB_SECRET_ARN") or ""
    if _conn is not None and (_source != source or not _healthy(_conn)):
        discard()
    if _conn is None:
        _conn = _open(source, settings)
        _source = source
    _last_used = time.monotonic()
    return _conn


def discard() -> None:
    """Drop the connection (after a database failure) so the next call opens a new one."""
    global _conn, _source
    if _conn is not None:
        with contextlib.suppress(psycopg.Error):
            _conn.close()
    _conn, _source = None, None


def _healthy(conn: psycopg.Connection[Any]) -> bool:
    if conn.closed or conn.broken:
        return False
    if time.monotonic() - _last_used < PING_AFTER_SECONDS:
        return True
    try:
        PostgresStore(conn).now()
    except DatabaseError:
        return False
    return True


def _open(source: str, settings: Settings) -> psycopg.Connection[Any]:
    if not source:
        raise ConfigurationError("set TICKQ_DATABASE_URL or TICKQ_DB_SECRET_ARN")
    conninfo = settings.database_url or _conninfo_from_secret(source)
    try:
        return psycopg.connect(
            conninfo,
            autocommit=True,
            prepare_threshold=settings.prepare_threshold,
            connect_timeout=10,
            application_name=os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "tickq"),
        )
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"cannot connect to the database: {exc}".strip()) from exc


def _conninfo_from_secret(arn: str) -> str:
    from aws_lambda_powertools.utilities import parameters

    secret = parameters.get_secret(arn, transform="json", max_age=SECRET_MAX_AGE)
    if not isinstance(secret, dict):
        raise ConfigurationError(f"secret {arn} is not a JSON object in the RDS format")
    missing = [k for k in ("host", "username", "password") if not secret.get(k)]
    if missing:
        raise ConfigurationError(f"secret {arn} lacks {', '.join(missing)} (RDS secret format)")
    return make_conninfo(
        host=str(secret["host"]),
        port=str(secret.get("port") or 5432),
        user=str(secret["username"]),
        password=str(secret["password"]),
        dbname=str(secret.get("dbname") or "postgres"),
    )
