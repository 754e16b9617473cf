"""The per-environment connection: Secrets Manager credentials, reuse, and recovery."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import boto3
import psycopg
import pytest

from tickq.functions import db


def _rds_secret(database_url: str) -> dict[str, object]:
    """The test database's connection in the RDS secret format."""
    parts = urlsplit(database_url)
    query = parse_qs(parts.query)
    return {
        "engine": "postgres",
        "host": query.get("host", [parts.hostname])[0],
        "port": int(query.get("port", [parts.port or 5432])[0]),
        "username": parts.username,
        "password": "unused-with-trust-auth",
        "dbname": parts.path.lstrip("/"),
    }


@pytest.mark.usefixtures("function_env", "aws")
def test_connects_with_credentials_from_secrets_manager(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    arn = boto3.client("secretsmanager").create_secret(
        Name="tickq/worker", SecretString=json.dumps(_rds_secret(database_url))
    )["ARN"]
    monkeypatch.setenv("TICKQ_DB_SECRET_ARN", arn)

    conn = db.connection()

    assert conn.execute("select current_database()").fetchone() == (
        urlsplit(database_url).path.lstrip("/"),
    )
    assert conn.autocommit


@pytest.mark.usefixtures("function_env", "aws")
def test_a_secret_missing_fields_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from queue_core import ConfigurationError

    arn = boto3.client("secretsmanager").create_secret(
        Name="tickq/broken", SecretString=json.dumps({"host": "db"})
    )["ARN"]
    monkeypatch.setenv("TICKQ_DB_SECRET_ARN", arn)
    with pytest.raises(ConfigurationError, match="username, password"):
        db.connection()


@pytest.mark.usefixtures("function_env")
def test_reuses_one_connection_across_invocations(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    assert db.connection() is db.connection()


@pytest.mark.usefixtures("function_env")
def test_reopens_after_the_server_dropped_the_connection(
    database_url: str, monkeypatch: pytest.MonkeyPatch, conn: psycopg.Connection
) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    first = db.connection()
    conn.execute("select pg_terminate_backend(%s)", (first.info.backend_pid,))
    # As after a long freeze: the next hand-out pings before trusting the socket.
    monkeypatch.setattr(db, "_last_used", 0.0)

    second = db.connection()

    assert second is not first and first.closed
    assert second.execute("select 1").fetchone() == (1,)


@pytest.mark.usefixtures("function_env")
def test_prepared_statements_can_be_turned_off_for_proxies(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    monkeypatch.setenv("TICKQ_PREPARE_THRESHOLD", "off")
    assert db.connection().prepare_threshold is None


@pytest.mark.usefixtures("function_env")
def test_no_database_configured_is_a_clear_error() -> None:
    from queue_core import ConfigurationError

    with pytest.raises(ConfigurationError, match="TICKQ_DATABASE_URL or TICKQ_DB_SECRET_ARN"):
        db.connection()
