"""`tickq invoke`: a template function run in-process, the way `sam local invoke` runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from queue_core import Registry, enqueue
from tickq.functions import db
from tickq.infra.init_app import write_app
from tickq.infra.local.invoke import (
    LocalInvokeError,
    _Resolver,
    function_config,
    invoke,
    load_template,
)
from tickq.infra.local.lambda_context import LocalContext

from .conftest import EVENTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def template() -> Any:
    return load_template(ROOT / "template.yaml")


def test_globals_merge_under_the_functions_own_settings(template: Any) -> None:
    tick = function_config(template, "TickFunction")
    assert tick.handler == "tickq.functions.tick.handler"
    assert (tick.timeout, tick.memory) == (120, 1024)
    assert tick.environment["POWERTOOLS_SERVICE_NAME"] == "tickq"  # from Globals
    assert tick.environment["TICKQ_LEASE_SECONDS"] == "180"  # the function's own
    assert tick.environment["TICKQ_TASK_MODULES"] == "tickq.functions.sample_tasks"  # a default
    # Parameters without a default and resources have no local value.
    assert {"TICKQ_DB_SECRET_ARN", "TICKQ_EVENT_BUS"} <= set(tick.unresolved)


def test_unknown_function_names_the_ones_there_are(template: Any) -> None:
    with pytest.raises(LocalInvokeError, match="TickFunction"):
        function_config(template, "NoSuchFunction")


def test_intrinsics_resolve_from_defaults_and_pseudo_parameters() -> None:
    resolver = _Resolver({"Parameters": {"Stage": {"Type": "String", "Default": "dev"}}})
    assert resolver.resolve({"Fn::Sub": "${AWS::StackName}-${Stage}"}) == "tickq-local-dev"
    assert resolver.resolve({"Fn::Sub": ["${X}/${Stage}", {"X": "a"}]}) == "a/dev"
    assert resolver.resolve({"Fn::Sub": "${Missing}"}) is None
    assert resolver.resolve({"Fn::GetAtt": ["Bus", "Arn"]}) is None
    assert resolver.resolve(True) == "true"


def test_context_counts_down_from_the_timeout() -> None:
    now = [100.0]
    context = LocalContext("TickFunction", timeout_seconds=120, clock=lambda: now[0])
    assert context.get_remaining_time_in_millis() == 120_000
    now[0] += 30.5
    assert context.get_remaining_time_in_millis() == 89_500
    now[0] += 500
    assert context.get_remaining_time_in_millis() == 0


def tickq_invoke(
    function: str, event: Path, *env: str, url: str, template: Path | None = None
) -> Any:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TICKQ_")}
    environ["TICKQ_DATABASE_URL"] = url
    command = [
        sys.executable,
        "-m",
        "tickq.infra.cli.program",
        "invoke",
        function,
        "--event",
        str(event),
    ]
    if template is not None:
        command += ["--template", str(template)]
    for pair in env:
        command += ["--env", pair]
    done = subprocess.run(
        command, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_cli_tick_drains_a_local_queue(database_url: str, conn: psycopg.Connection) -> None:
    # A separate process: the CLI end to end, with the template's sample task module.
    for n in range(3):
        enqueue(conn, "echo", {"n": n}, using=Registry())

    report = tickq_invoke("TickFunction", EVENTS / "tick.json", url=database_url)

    assert report["succeeded"] == 3
    done = conn.execute("select status, result from tickq.jobs order by created_at").fetchall()
    assert done == [("succeeded", {"echo": {"n": n}}) for n in range(3)]


def test_the_functions_code_folder_comes_first_on_the_import_path(
    tmp_path: Path, database_url: str, conn: psycopg.Connection
) -> None:
    # Given: an application elsewhere whose task module lives in its CodeUri folder only.
    app = tmp_path / "app"
    write_app(app)
    job = enqueue(conn, "hello", {"name": "Ada"}, using=Registry())

    # When: its TickFunction runs from this repository's folder, naming its template.
    report = tickq_invoke(
        "TickFunction",
        app / "events" / "tick.json",
        url=database_url,
        template=app / "template.yaml",
    )

    # Then: `tasks` (its TaskModules) was imported from the application's folder.
    assert report["succeeded"] == 1
    row = conn.execute("select status, result from tickq.jobs where id = %s", (job.id,)).fetchone()
    assert row == ("succeeded", {"greeting": "hello, Ada"})


def test_api_post_then_get_round_trip(
    app_login_url: str, tasks: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In-process, as `tickq invoke ApiFunction` runs it: the template's environment is set
    # for the call (and only for it), the handler sees a countdown context.
    monkeypatch.setenv("TICKQ_DATABASE_URL", app_login_url)
    db.discard()
    template = ROOT / "template.yaml"
    post_event = json.loads((EVENTS / "api-post-job.json").read_text(encoding="utf-8"))

    posted = invoke("ApiFunction", post_event, template_path=template)

    assert posted.result["statusCode"] == 202, posted.result
    assert "AWS_SAM_LOCAL" not in os.environ  # the function's environment did not leak
    job = json.loads(posted.result["body"])
    get_event = json.loads((EVENTS / "api-get-job.json").read_text(encoding="utf-8"))
    get_event["rawPath"] = get_event["requestContext"]["http"]["path"] = f"/jobs/{job['id']}"
    get_event["pathParameters"] = {"id": job["id"]}

    fetched = invoke("ApiFunction", get_event, template_path=template)

    assert fetched.result["statusCode"] == 200
    assert json.loads(fetched.result["body"])["id"] == job["id"]
    assert not fetched.timed_out and fetched.config.timeout == 30
    db.discard()
