"""Fixtures for the browser tests: headless chromium, and ApiFunction behind `tickq serve`.

The server runs the real handler in this process against the test database, acting as
tickq_app exactly as `tickq serve` does, so row-level security decides what a user sees.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from infra import serve

from .cdp import Chromium, Page, find_chromium

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

Serve = Callable[[serve.DevIdentity], serve.ApiServer]


@pytest.fixture(scope="session")
def chromium() -> Iterator[Chromium]:
    executable = find_chromium()
    if executable is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")
    with Chromium(executable) as browser:
        yield browser


@pytest.fixture
def page(chromium: Chromium) -> Iterator[Page]:
    tab = chromium.new_page()
    try:
        yield tab
    finally:
        tab.close()


@pytest.fixture
def serve_as(
    conn: psycopg.Connection, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Serve]:
    """Start the local API server for a development identity; stopped after the test."""
    from functions import db

    url = serve.handler_database_url(conn, database_url, "tickq_app")
    monkeypatch.setenv("TICKQ_DATABASE_URL", url)
    monkeypatch.delenv("TICKQ_OPERATORS", raising=False)
    monkeypatch.delenv("TICKQ_OPERATOR_GROUPS", raising=False)
    handler = serve.api_handler()
    started: list[tuple[serve.ApiServer, threading.Thread]] = []

    def start(identity: serve.DevIdentity) -> serve.ApiServer:
        server = serve.ApiServer(("127.0.0.1", 0), handler, identity)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        started.append((server, thread))
        return server

    yield start
    for server, thread in started:
        server.shutdown()
        server.server_close()
        thread.join()
    db.discard()
