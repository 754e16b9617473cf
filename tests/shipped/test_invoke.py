"""`tickq invoke` of every function of the application's template, by the installed tickq
from the application's folder: each handler imported as Lambda imports it (Handler
`tickq.functions.*` from site-packages, the application's folder first on the import
path) and run against the test database, with events built from the sample events the
wheel ships (tickq/infra/events)."""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest

from .conftest import App, Ran, function_names, load_template

pytestmark = pytest.mark.slow

# The functions this module invokes; a function the template gains needs a test here.
INVOKED = {
    "ApiFunction",
    "EnqueueFunction",
    "MaintenanceFunction",
    "MigrateFunction",
    "SchedulerFunction",
    "TickFunction",
}
CONTENT_TYPES = {".js": "text/javascript", ".css": "text/css"}


def http_answer(ran: Ran) -> tuple[int, dict[str, str], str]:
    """Status, headers (lower-cased names) and body text of an ApiFunction result."""
    result = ran.json()
    assert isinstance(result, dict) and "statusCode" in result, ran.explain()
    headers = {k.lower(): str(v) for k, v in (result.get("headers") or {}).items()}
    body = result.get("body") or ""
    if result.get("isBase64Encoded"):
        body = base64.b64decode(body).decode("utf-8")
    return int(result["statusCode"]), headers, body


def test_every_function_of_the_template_is_invoked_here(app: App) -> None:
    functions = function_names(load_template(app.template))
    assert functions, f"no AWS::Serverless::Function in {app.template}"
    assert functions == INVOKED, (
        f"{app.template} has functions {sorted(functions)}; this module invokes "
        f"{sorted(INVOKED)}: give each new function an invocation here"
    )


def test_api_function_serves_the_page_and_every_asset_it_loads(
    app: App, tmp_path: Path, database_url: str
) -> None:
    static = app.shipped.site_packages / "tickq" / "functions" / "static"
    pages = {}
    for path in ("/", "/ui"):
        ran = app.invoke("ApiFunction", app.api_event("GET", path), tmp_path, database_url)
        status, headers, body = http_answer(ran)
        assert status == 200, f"GET {path}: {status} {body[:500]}\n{ran.explain()}"
        assert headers.get("content-type", "").startswith("text/html"), ran.explain()
        pages[path] = body
    assets = re.findall(r'(?:src|href)="(ui/[^"]+)"', pages["/ui"])
    assert pages["/"] == pages["/ui"]
    assert {"ui/app.js", "ui/style.css"} <= set(assets), pages["/ui"][:2000]

    wrong = []
    for asset in assets:
        path = f"/{asset}"
        ran = app.invoke("ApiFunction", app.api_event("GET", path), tmp_path, database_url)
        status, headers, body = http_answer(ran)
        name = asset.removeprefix("ui/")
        expected_type = CONTENT_TYPES[Path(name).suffix]
        if status != 200:
            wrong.append(f"GET {path}: {status} {body[:300]}\n{ran.explain()}")
        elif not headers.get("content-type", "").startswith(expected_type):
            wrong.append(f"GET {path}: content type {headers.get('content-type')}\n{ran.explain()}")
        elif body != (static / name).read_text(encoding="utf-8"):
            wrong.append(f"GET {path}: not the installed {static / name}\n{ran.explain()}")
    assert not wrong, "\n\n".join(wrong)


def test_api_function_enqueues_and_reads_back_a_job(
    app: App, tmp_path: Path, database_url: str, conn: psycopg.Connection
) -> None:
    body = {"type": "hello", "payload": {"name": "Lin"}}
    ran = app.invoke("ApiFunction", app.api_event("POST", "/jobs", body), tmp_path, database_url)
    status, _, text = http_answer(ran)
    assert status == 202, f"{status} {text}\n{ran.explain()}"
    job_id = json.loads(text)["id"]

    ran = app.invoke("ApiFunction", app.api_event("GET", f"/jobs/{job_id}"), tmp_path, database_url)
    status, _, text = http_answer(ran)
    assert status == 200, f"{status} {text}\n{ran.explain()}"
    job = json.loads(text)
    assert (job["id"], job["type"], job["status"]) == (job_id, "hello", "queued"), ran.explain()
    row = conn.execute("select user_id::text from tickq.jobs where id = %s", (job_id,)).fetchone()
    assert row is not None and row[0] is not None  # the caller owns it


def test_tick_function_drains_a_job_of_the_apps_own_task(
    app: App, tmp_path: Path, database_url: str, conn: psycopg.Connection
) -> None:
    # The README's steps: enqueue with the app's task module, then one tick as Lambda runs it.
    env = {"TICKQ_DATABASE_URL": database_url}
    enqueued = app.run(
        "enqueue", "hello", "--payload", '{"name": "Ada"}', "--tasks", "tasks", "--json", env=env
    )
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (1,), enqueued.explain()

    ran = app.invoke("TickFunction", Path("events/tick.json"), tmp_path, database_url)

    report = ran.json()
    assert report.get("succeeded") == 1, ran.explain()
    row = conn.execute("select type, status, result from tickq.jobs").fetchone()
    assert row == ("hello", "succeeded", {"greeting": "hello, Ada"}), ran.explain()


def test_enqueue_function_enqueues_one_job_and_a_batch(
    app: App, tmp_path: Path, database_url: str, conn: psycopg.Connection
) -> None:
    # The shipped samples, with the application's own job type.
    one = {**app.sample("enqueue"), "type": "hello", "payload": {"name": "Grace"}}
    batch = app.sample("enqueue-batch")
    batch["jobs"] = [{**job, "type": "hello"} for job in batch["jobs"]]

    single = app.invoke("EnqueueFunction", one, tmp_path, database_url)
    several = app.invoke("EnqueueFunction", batch, tmp_path, database_url)

    assert [j["status"] for j in single.json()["jobs"]] == ["queued"], single.explain()
    assert len(several.json()["jobs"]) == len(batch["jobs"]), several.explain()
    count = conn.execute("select count(*) from tickq.jobs where type = 'hello'").fetchone()
    assert count == (1 + len(batch["jobs"]),)


def test_scheduler_function_fires_a_due_schedule(
    app: App, tmp_path: Path, database_url: str, conn: psycopg.Connection
) -> None:
    env = {"TICKQ_DATABASE_URL": database_url}
    app.run("schedules", "add", "greet", "* * * * *", "hello", "--tasks", "tasks", env=env)
    # Due now, without waiting for the next minute.
    conn.execute("update tickq.schedules set next_at = now() - interval '1 minute'")

    ran = app.invoke("SchedulerFunction", app.sample("scheduler"), tmp_path, database_url)

    report = ran.json()
    assert report.get("fired") == 1 and not report.get("errors"), ran.explain()
    jobs = conn.execute("select type from tickq.jobs").fetchall()
    assert jobs == [("hello",)], ran.explain()


def test_maintenance_function_runs(
    app: App, tmp_path: Path, database_url: str, conn: psycopg.Connection
) -> None:
    ran = app.invoke("MaintenanceFunction", app.sample("maintenance"), tmp_path, database_url)
    report = ran.json()
    assert isinstance(report, dict) and report.get("reclaimed") == 0, ran.explain()


class _Responses(ThreadingHTTPServer):
    """Where CloudFormation would take the custom resource's answer: a local URL."""

    daemon_threads = True
    answers: list[Any]


class _ResponseHandler(BaseHTTPRequestHandler):
    server: _Responses

    def do_PUT(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.answers.append(json.loads(self.rfile.read(length) or b"null"))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def response_url() -> Iterator[tuple[str, list[Any]]]:
    server = _Responses(("127.0.0.1", 0), _ResponseHandler)
    server.answers = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/cloudformation", server.answers
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_migrate_function_migrates_a_new_database_and_answers_cloudformation(
    app: App,
    tmp_path: Path,
    fresh_database_url: str,
    response_url: tuple[str, list[Any]],
) -> None:
    url, answers = response_url
    event = {**app.sample("migrate"), "ResponseURL": url}

    ran = app.invoke("MigrateFunction", event, tmp_path, fresh_database_url)

    answer = ran.json()
    assert answer.get("Status") == "SUCCESS", ran.explain()
    assert answer["Data"]["Applied"] not in ("", "none"), ran.explain()
    assert answers == [answer], ran.explain()
    with psycopg.connect(fresh_database_url) as fresh:
        found = fresh.execute("select to_regclass('tickq.jobs')::text").fetchone()
    assert found == ("tickq.jobs",), ran.explain()
