"""One database connection per Lambda execution environment, reused while it stays healthy.

Reads TICKQ_DATABASE_URL, or TICKQ_DB_SECRET_ARN naming a Secrets Manager secret in the
RDS format (host, port, username, password, dbname), fetched through Powertools (on a
client with the bounded timeouts of every AWS call tickq makes) and cached for five
minutes. When the database rejects the cached password (it was rotated), the secret is
fetched again once and the connection retried, so a warm function recovers at once
instead of failing until its cache expires or a cold start.

A secret that RDS manages for its master user (ManageMasterUserPassword) holds only the
username and password: TICKQ_DB_HOST, TICKQ_DB_PORT and TICKQ_DB_NAME (the stack's
DatabaseHost, DatabasePort and DatabaseName) give what a secret lacks; the secret's own
values win.

With TICKQ_DB_IAM_AUTH=1 the password is an RDS IAM authentication token instead, signed
with the function's credentials for the host, port and user of the URL or secret; each
new connection gets a fresh one (they live 15 minutes), over TLS as RDS requires.

Nothing here pins an RDS Proxy connection beyond a transaction: no session SET, no
LISTEN, no advisory locks; TICKQ_PREPARE_THRESHOLD=off turns prepared statements off.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

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


def new_connection() -> psycopg.Connection[Any]:
    """A connection of its own to the environment's database (for a transactional handler),
    opened as the shared one is: the secret, a fresh IAM token, the prepared-statement
    setting."""
    settings = Settings.from_env()
    return _open(settings.database_url or os.environ.get("TICKQ_DB_SECRET_ARN") or "", settings)


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
    from_secret = not settings.database_url
    conninfo = settings.database_url or _conninfo_from_secret(source)
    try:
        return _connect(conninfo, settings)
    except psycopg.OperationalError as exc:
        if not (from_secret and _rejected_credentials(exc)):
            raise DatabaseError(f"cannot connect to the database: {exc}".strip()) from exc
    # The cached secret is stale (rotated): fetch it again, once.
    try:
        return _connect(_conninfo_from_secret(source, fresh=True), settings)
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"cannot connect to the database: {exc}".strip()) from exc


def _connect(conninfo: str, settings: Settings) -> psycopg.Connection[Any]:
    if iam_auth_enabled():
        conninfo = with_iam_token(conninfo, _rds_token)
    return psycopg.connect(
        conninfo,
        autocommit=True,
        prepare_threshold=settings.prepare_threshold,
        connect_timeout=10,
        application_name=os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "tickq"),
    )


def _rejected_credentials(exc: psycopg.OperationalError) -> bool:
    """The server refused the login's password (invalid_password, or a refusal worded so)."""
    return exc.sqlstate in ("28P01", "28000") or "password authentication failed" in str(exc)


def iam_auth_enabled() -> bool:
    return os.environ.get("TICKQ_DB_IAM_AUTH", "").strip().lower() in ("1", "true", "yes")


def with_iam_token(conninfo: str, token: Any) -> str:
    """`conninfo` with its password replaced by `token(host, port, user)`, over TLS."""
    params = conninfo_to_dict(conninfo)
    host, user = params.get("host"), params.get("user")
    if not host or not user:
        raise ConfigurationError("TICKQ_DB_IAM_AUTH needs a host and a user in the URL or secret")
    port = int(params.get("port") or 5432)
    sslmode = params.get("sslmode") or "require"
    return make_conninfo(conninfo, password=token(host, port, user), sslmode=sslmode)


def _rds_token(host: str, port: int, user: str) -> str:
    from tickq.functions.aws import clients

    token: str = clients("rds").generate_db_auth_token(DBHostname=host, Port=port, DBUsername=user)
    return token


def _conninfo_from_secret(arn: str, *, fresh: bool = False) -> str:
    from tickq.functions.aws import secrets

    secret = secrets().get(arn, transform="json", max_age=SECRET_MAX_AGE, force_fetch=fresh)
    if not isinstance(secret, dict):
        raise ConfigurationError(f"secret {arn} is not a JSON object in the RDS format")
    missing = [k for k in ("username", "password") if not secret.get(k)]
    if missing:
        raise ConfigurationError(f"secret {arn} lacks {', '.join(missing)} (RDS secret format)")
    host = secret.get("host") or _env("TICKQ_DB_HOST")
    if not host:
        raise ConfigurationError(
            f"secret {arn} names no host (an RDS-managed secret holds only the username and "
            "password): set TICKQ_DB_HOST (the stack's DatabaseHost parameter) to the "
            "database's endpoint"
        )
    return make_conninfo(
        host=str(host),
        port=str(secret.get("port") or _env("TICKQ_DB_PORT") or 5432),
        user=str(secret["username"]),
        password=str(secret["password"]),
        dbname=str(secret.get("dbname") or _env("TICKQ_DB_NAME") or "postgres"),
    )


def _env(name: str) -> str:
    """An environment variable, blank when unset or only whitespace."""
    return os.environ.get(name, "").strip()
