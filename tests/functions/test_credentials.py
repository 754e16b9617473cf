"""Credentials that change under a warm function: a rotated password is fetched again and
the connection retried once; RDS IAM tokens are minted for each new connection."""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs

import boto3
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from queue_core import DatabaseError
from tickq.functions import db


@pytest.fixture
def password_login(database_url: str) -> Iterator[tuple[str, str]]:
    """A worker login that must give its password (scram) on this server: (name, url).

    Rules for this one role go first in pg_hba.conf and leave after; a server whose file
    this process cannot write (not the throwaway one) skips the test."""
    with psycopg.connect(database_url, autocommit=True) as admin:
        hba_row = admin.execute("show hba_file").fetchone()
        assert hba_row is not None
        hba = Path(hba_row[0])
        if not (hba.is_file() and os.access(hba, os.W_OK)):
            pytest.skip(f"cannot edit {hba} to require a password (not the throwaway server)")
        name = f"tickq_rotating_{secrets.token_hex(4)}"
        admin.execute(
            sql.SQL("create role {} login password 'first' in role tickq_worker").format(
                sql.Identifier(name)
            )
        )
        original = hba.read_text()
        rules = f"local all {name} scram-sha-256\nhost all {name} 127.0.0.1/32 scram-sha-256\n"
        hba.write_text(rules + original)
        admin.execute("select pg_reload_conf()")
        url = make_conninfo(database_url, user=name)
        _wait_until_password_required(url)
        try:
            yield name, url
        finally:
            hba.write_text(original)
            admin.execute("select pg_reload_conf()")
            admin.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity where usename = %s",
                (name,),
            )
            admin.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))


def rds_secret(url: str, password: str) -> dict[str, object]:
    """A login's connection in the RDS secret format, with `password`."""
    params = conninfo_to_dict(url)
    return {
        "engine": "postgres",
        "host": params["host"],
        "port": int(params.get("port") or 5432),
        "username": params["user"],
        "password": password,
        "dbname": params["dbname"],
    }


def _wait_until_password_required(url: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            psycopg.connect(url, password="wrong").close()
        except psycopg.OperationalError:
            return
        time.sleep(0.05)
    raise AssertionError("the server did not start asking for the password")


@pytest.mark.usefixtures("function_env", "aws")
def test_a_password_rotated_while_warm_is_fetched_again_and_the_connection_retried(
    password_login: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name, url = password_login
    secret = rds_secret(url, "first")
    client = boto3.client("secretsmanager")
    arn = client.create_secret(Name="tickq/rotating", SecretString=json.dumps(secret))["ARN"]
    monkeypatch.setenv("TICKQ_DB_SECRET_ARN", arn)
    assert db.connection().execute("select current_user").fetchone() == (name,)

    # When the password is rotated (the database and the secret), and the warm function's
    # connection is lost, while its cached copy of the secret is still fresh
    with psycopg.connect(url, password="first", autocommit=True) as own:
        own.execute(sql.SQL("alter role {} password 'second'").format(sql.Identifier(name)))
    client.put_secret_value(SecretId=arn, SecretString=json.dumps({**secret, "password": "second"}))
    db.discard()

    # Then the next connection refetches the secret once and logs in
    assert db.connection().execute("select current_user").fetchone() == (name,)


@pytest.mark.usefixtures("function_env", "aws")
def test_a_wrong_password_in_a_fresh_secret_is_still_a_clear_database_error(
    password_login: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url = password_login
    secret = rds_secret(url, "not-it")
    client = boto3.client("secretsmanager")
    arn = client.create_secret(Name="tickq/wrong", SecretString=json.dumps(secret))["ARN"]
    monkeypatch.setenv("TICKQ_DB_SECRET_ARN", arn)
    with pytest.raises(DatabaseError, match="password authentication failed"):
        db.connection()


@pytest.mark.usefixtures("function_env", "aws")
def test_iam_auth_signs_a_fresh_token_for_each_connection(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The throwaway server trusts its logins, so the token is ignored there; what is
    # checked is the token itself, and that the function still connects with it.
    monkeypatch.setenv("TICKQ_DB_IAM_AUTH", "1")
    url = make_conninfo(database_url, host="127.0.0.1", sslmode="disable")
    monkeypatch.setenv("TICKQ_DATABASE_URL", url)
    assert db.connection().execute("select 1").fetchone() == (1,)

    first = db.with_iam_token(url, db._rds_token)
    time.sleep(1.1)
    second = db.with_iam_token(url, db._rds_token)
    tokens = [conninfo_to_dict(c)["password"] for c in (first, second)]
    assert tokens[0] != tokens[1]
    query = parse_qs(str(tokens[0]).split("?", 1)[1])
    assert query["Action"] == ["connect"]
    assert query["DBUser"] == [conninfo_to_dict(url)["user"]]
    assert "X-Amz-Signature" in query


def test_iam_auth_requires_tls_unless_told_otherwise_and_a_host_and_user() -> None:
    token = db.with_iam_token("host=db.example user=app dbname=q", lambda h, p, u: f"{h}:{p}:{u}")
    assert conninfo_to_dict(token)["sslmode"] == "require"
    assert conninfo_to_dict(token)["password"] == "db.example:5432:app"
    from queue_core import ConfigurationError

    with pytest.raises(ConfigurationError, match="host and a user"):
        db.with_iam_token("dbname=q", lambda h, p, u: "t")


DB_LOCATION_ENV = ("TICKQ_DB_HOST", "TICKQ_DB_PORT", "TICKQ_DB_NAME")


def rds_managed_secret(url: str) -> dict[str, object]:
    """What RDS keeps for a master user it manages: the login alone, no host, port or dbname."""
    params = conninfo_to_dict(url)
    return {"username": params["user"], "password": params.get("password") or "unused"}


@pytest.mark.usefixtures("function_env", "aws")
def test_an_rds_managed_secret_connects_at_the_host_port_and_database_of_the_environment(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    params = conninfo_to_dict(database_url)
    client = boto3.client("secretsmanager")
    secret = rds_managed_secret(database_url)
    arn = client.create_secret(Name="tickq/managed", SecretString=json.dumps(secret))["ARN"]
    monkeypatch.setenv("TICKQ_DB_SECRET_ARN", arn)
    monkeypatch.setenv("TICKQ_DB_HOST", str(params.get("host") or "localhost"))
    monkeypatch.setenv("TICKQ_DB_PORT", str(params.get("port") or 5432))
    monkeypatch.setenv("TICKQ_DB_NAME", str(params["dbname"]))

    row = db.connection().execute("select current_user, current_database()").fetchone()

    assert row == (params["user"], params["dbname"])


@pytest.mark.usefixtures("aws")
def test_the_secrets_own_host_port_and_database_win_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = {
        "username": "worker",
        "password": "pw",
        "host": "db.example",
        "port": 6432,
        "dbname": "queue",
    }
    client = boto3.client("secretsmanager")
    arn = client.create_secret(Name="tickq/full", SecretString=json.dumps(secret))["ARN"]
    monkeypatch.setenv("TICKQ_DB_HOST", "elsewhere.example")
    monkeypatch.setenv("TICKQ_DB_PORT", "5432")
    monkeypatch.setenv("TICKQ_DB_NAME", "other")

    params = conninfo_to_dict(db._conninfo_from_secret(arn))

    assert (params["host"], params["port"], params["dbname"]) == ("db.example", "6432", "queue")


@pytest.mark.usefixtures("aws")
def test_what_neither_the_secret_nor_the_environment_gives_has_defaults_but_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from queue_core import ConfigurationError

    for name in DB_LOCATION_ENV:
        monkeypatch.delenv(name, raising=False)
    client = boto3.client("secretsmanager")
    secret = {"username": "owner", "password": "pw"}
    arn = client.create_secret(Name="tickq/bare", SecretString=json.dumps(secret))["ARN"]

    with pytest.raises(ConfigurationError, match=r"names no host.*TICKQ_DB_HOST.*DatabaseHost"):
        db._conninfo_from_secret(arn)

    monkeypatch.setenv("TICKQ_DB_HOST", "db.example")
    params = conninfo_to_dict(db._conninfo_from_secret(arn))
    assert (params["host"], params["port"], params["dbname"]) == ("db.example", "5432", "postgres")
    assert (params["user"], params["password"]) == ("owner", "pw")
