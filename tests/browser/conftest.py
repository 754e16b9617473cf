"""Fixtures for the browser tests: Debian's chromium driven by Playwright, and ApiFunction
behind `tickq serve`.

Playwright drives the system's chromium (`executable_path`), so no browser is downloaded.
The server runs the real handler in this process against the test database, acting as
tickq_app exactly as `tickq serve` does, so row-level security decides what a user sees.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from tickq.infra.local import serve

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM_NAMES = ("chromium", "chromium-browser")
# As root in a container: no sandbox, no GPU, and nothing that phones home.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
)
# Every wait is bounded only so that a hang on a slow, shared machine fails; no test
# asserts on timing.
TIMEOUT_MS = 30_000

Serve = Callable[[serve.DevIdentity], serve.ApiServer]

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


@pytest.fixture(scope="session")
def browser() -> Iterator[sync_api.Browser]:
    executable = next((p for n in CHROMIUM_NAMES if (p := shutil.which(n))), None)
    if executable is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=list(CHROMIUM_FLAGS)
        )
        try:
            yield launched
        finally:
            launched.close()


class ConsoleLog(list[str]):
    """The page's console errors and uncaught exceptions, to assert there were none."""

    def problems(self) -> list[str]:
        return [line for line in self if line.startswith(("error", "exception"))]


@pytest.fixture
def console_log() -> ConsoleLog:
    return ConsoleLog()


@pytest.fixture
def page(browser: sync_api.Browser, console_log: ConsoleLog) -> Iterator[sync_api.Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    tab.on("console", lambda message: console_log.append(f"{message.type}: {message.text}"))
    tab.on("pageerror", lambda error: console_log.append(f"exception: {error}"))
    try:
        yield tab
    finally:
        context.close()


@pytest.fixture
def serve_as(
    conn: psycopg.Connection, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Serve]:
    """Start the local API server for a development identity; stopped after the test."""
    from tickq.functions import db

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
