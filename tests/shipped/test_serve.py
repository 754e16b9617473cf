"""`tickq serve` of the installed tickq, from the application's folder: the console's page,
its assets and the operator view over HTTP, then in a real browser (Debian's chromium)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from .conftest import BROWSER_TIMEOUT_MS, SERVE_USER, App, Served

pytestmark = pytest.mark.slow

# What the operator view asks the API for (functions/static/app.js), besides the job list.
OPERATOR_ROUTES = ("/admin/stats", "/admin/queues", "/admin/outbox", "/admin/charts", "/admin/jobs")


def get(served: Served, path: str) -> tuple[int, dict[str, str], str]:
    status, headers, body = served.request("GET", path)
    return status, {k.lower(): v for k, v in headers.items()}, body.decode("utf-8", "replace")


def enqueue(served: Served, body: dict[str, Any]) -> str:
    status, _, answer = served.request("POST", "/jobs", body)
    assert status == 202, f"POST /jobs: {status} {answer[:500]!r}\n{served.explain()}"
    return str(json.loads(answer)["id"])


def test_the_console_page_its_assets_and_the_operator_view_answer(
    served: Served, app: App, tmp_path: Path, database_url: str
) -> None:
    static = app.shipped.site_packages / "tickq" / "functions" / "static"
    wrong: list[tuple[str, str]] = []  # (path, what is wrong)
    pages = {}
    for path in ("/", "/ui", "/ui?view=operator"):
        status, headers, body = get(served, path)
        if status != 200 or not headers.get("content-type", "").startswith("text/html"):
            wrong.append((path, f"{status} {headers.get('content-type')} {body[:300]!r}"))
        pages[path] = body
    assets = re.findall(r'(?:src|href)="(ui/[^"]+)"', pages["/ui"])
    if not {"ui/app.js", "ui/style.css"} <= set(assets):
        wrong.append(("/ui", f"loads no ui/app.js and ui/style.css: {pages['/ui'][:300]!r}"))
    for asset in assets:
        status, _, body = get(served, f"/{asset}")
        installed = (static / asset.removeprefix("ui/")).read_text(encoding="utf-8")
        if status != 200 or body != installed:
            wrong.append((f"/{asset}", f"{status} {body[:300]!r} (not the installed file)"))
    for path in ("/me", *OPERATOR_ROUTES):
        status, _, body = get(served, path)
        if status != 200:
            wrong.append((path, f"{status} {body[:300]!r}"))
        elif path == "/me" and '"operator": true' not in body:
            wrong.append((path, f"{body[:300]!r}: not an operator"))
    assert not wrong, (
        "\n".join(f"GET {path}: {what}" for path, what in wrong)
        + f"\n{served.explain()}\n"
        + app.why_request("GET", wrong[0][0], tmp_path, database_url)
    )


def test_in_a_browser_the_page_the_operator_view_and_a_jobs_detail_load(
    served: Served,
    browser: Any,
    app: App,
    tmp_path: Path,
    database_url: str,
    conn: psycopg.Connection,
) -> None:
    from playwright.sync_api import ConsoleMessage, Response, expect

    # Given a job the signed-in user enqueued through the served API
    job_id = enqueue(served, {"type": "hello", "payload": {"name": "Ada"}})
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(BROWSER_TIMEOUT_MS)
    problems: list[str] = []
    failed: list[tuple[int, str, str]] = []  # (status, method, path)

    def logged(message: ConsoleMessage) -> None:
        if message.type == "error":
            problems.append(f"console: {message.text}")

    def answered(response: Response) -> None:
        if response.status >= 400:
            path = urlsplit(response.url)
            target = path.path + (f"?{path.query}" if path.query else "")
            failed.append((response.status, response.request.method, target))

    def explain() -> str:
        text = f"failed answers: {failed}\npage problems: {problems}\n{served.explain()}"
        gets = [path for _, method, path in failed if method == "GET"]
        return (
            text
            if not gets
            else f"{text}\n" + app.why_request("GET", gets[0], tmp_path, database_url)
        )

    page.on("console", logged)
    page.on("pageerror", lambda error: problems.append(f"exception: {error}"))
    page.on("response", answered)
    try:
        # When the page opens: the job is listed, and its detail shows it
        page.goto(f"{served.url}/ui")
        row = page.locator(f'#jobs tbody tr[data-job-id="{job_id}"]')
        expect(row).to_have_attribute("data-status", "queued")
        expect(page.locator("#who")).to_contain_text(SERVE_USER)
        row.locator("a.job-link").click()
        expect(page.locator("#detail")).to_be_visible()
        expect(page.locator("#detail-title")).to_have_text(f"hello {job_id}")
        expect(page.locator("#detail-fields")).to_contain_text("queued")
        expect(page.locator("#detail-payload")).to_contain_text('"name": "Ada"')
        # And the operator view lists the job's queue
        page.goto(f"{served.url}/ui?view=operator")
        expect(page.locator("#view-operator")).to_be_visible()
        expect(page.locator("#queues tbody tr").first).to_contain_text("default")
        expect(page.locator("#chart-throughput svg")).to_be_attached()
    except Exception as exc:  # an expectation or a Playwright timeout
        raise AssertionError(f"{exc}\n{explain()}") from exc
    finally:
        context.close()
    assert failed == [], explain()
    assert problems == [], explain()
