"""`tickq serve` over real sockets: what a web page elsewhere could send it is refused (a
foreign Host, a foreign Origin, a body that is not JSON), and a stalled client stalls
nobody else."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tickq.functions import db
from tickq.infra.local import serve

ALICE = serve.DevIdentity("alice")


@pytest.fixture
def server(
    conn: psycopg.Connection, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[serve.ApiServer]:
    monkeypatch.setenv(
        "TICKQ_DATABASE_URL", serve.handler_database_url(conn, database_url, "tickq_app")
    )
    running = serve.ApiServer(("127.0.0.1", 0), serve.api_handler(), ALICE)
    thread = threading.Thread(target=running.serve_forever, daemon=True)
    thread.start()
    try:
        yield running
    finally:
        running.shutdown()
        running.server_close()
        thread.join()
        db.discard()


def request(
    server: serve.ApiServer, method: str, path: str, body: bytes = b"", **headers: str
) -> tuple[int, Any]:
    port = server.server_address[1]
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        client.putrequest(method, path, skip_host=True)
        client.putheader("Host", headers.pop("Host", f"127.0.0.1:{port}"))
        for name, value in headers.items():
            client.putheader(name.replace("_", "-"), value)
        client.putheader("Content-Length", str(len(body)))
        client.endheaders(body)
        response = client.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        client.close()


def jobs(conn: psycopg.Connection) -> int:
    row = conn.execute("select count(*) from tickq.jobs").fetchone()
    assert row is not None
    return int(row[0])


JSON = {"Content_Type": "application/json"}
JOB = json.dumps({"type": "report"}).encode()


def test_a_json_post_from_its_own_origin_is_served(
    server: serve.ApiServer, conn: psycopg.Connection
) -> None:
    port = server.server_address[1]
    origin = {"Origin": f"http://127.0.0.1:{port}"}
    assert request(server, "POST", "/jobs", JOB, **JSON, **origin)[0] == 202
    assert request(server, "GET", "/jobs", Host=f"localhost:{port}")[0] == 200
    assert jobs(conn) == 1


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Host": "attacker.example:80", **JSON}, 421),
        ({"Host": "attacker.example", **JSON}, 421),
        ({"Origin": "http://attacker.example", **JSON}, 403),
        ({"Origin": "null", **JSON}, 403),
        ({"Content_Type": "text/plain"}, 415),
        ({"Content_Type": "application/x-www-form-urlencoded"}, 415),
        ({}, 415),
    ],
    ids=["rebound-host", "bare-host", "foreign-origin", "null-origin", "text", "form", "none"],
)
def test_what_another_site_could_send_is_refused_and_writes_nothing(
    server: serve.ApiServer, conn: psycopg.Connection, headers: dict[str, str], status: int
) -> None:
    answer, body = request(server, "POST", "/jobs", JOB, **headers)
    assert answer == status, body
    assert body["message"]
    assert jobs(conn) == 0


def test_a_read_through_a_rebound_host_is_refused(server: serve.ApiServer) -> None:
    assert request(server, "GET", "/jobs", Host="attacker.example")[0] == 421


def test_a_stalled_client_does_not_stall_the_others(server: serve.ApiServer) -> None:
    port = server.server_address[1]
    with socket.create_connection(("127.0.0.1", port), timeout=20) as stalled:
        # A request whose body never comes.
        stalled.sendall(
            f"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{".encode()
        )
        started = time.monotonic()
        assert request(server, "GET", "/jobs")[0] == 200
        # Served while the other request still waits (the client timeout is 30 s).
        assert time.monotonic() - started < serve.CLIENT_TIMEOUT_SECONDS / 2
