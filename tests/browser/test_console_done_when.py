"""The operator console's "done when", literally, against the demo's data, with real
`tickq` processes and the page in a browser:

1. the operator view shows the per-minute chart with the demo's successes and its dead job;
2. pausing the default queue leaves newly enqueued jobs queued through a `tickq tick`, and
   resuming lets the next tick run them;
3. a bulk retry of two dead jobs from the page re-queues both;
4. in the operator's view of every user's jobs, the detail of the demo's long job lists
   its steps, and the pipeline's last job shows its three parents.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from playwright.sync_api import Page, expect

from tickq.infra.local.serve import DevIdentity

from .conftest import ARTIFACTS, Serve

ROOT = Path(__file__).resolve().parents[2]
TICKQ = str(Path(sys.executable).parent / "tickq")
ALICE = DevIdentity("alice")
OPERATOR = DevIdentity("olivia", operator_group="tickq-operators")
BARS = """() => [...document.querySelectorAll('#chart-throughput rect')]
  .reduce((sums, r) => ({...sums, [r.dataset.series]:
    (sums[r.dataset.series] || 0) + Number(r.dataset.count)}), {})"""

Tickq = Callable[..., Any]


@pytest.fixture
def tickq(database_url: str, clean_tables: None) -> Tickq:
    env = {
        **os.environ,
        "TICKQ_DATABASE_URL": database_url,
        "TICKQ_TASK_MODULES": "tickq.functions.sample_tasks",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("TICKQ_QUEUES", None)

    def run(*argv: str) -> Any:
        done = subprocess.run(
            [TICKQ, *argv, "--json"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"tickq {' '.join(argv)}: {done.stderr}"
        return json.loads(done.stdout)

    return run


def statuses(conn: psycopg.Connection, type_: str) -> list[str]:
    rows = conn.execute("select status from tickq.jobs where type = %s", (type_,)).fetchall()
    return sorted(r[0] for r in rows)


def test_the_console_against_the_demo(
    page: Page, conn: psycopg.Connection, serve_as: Serve, tickq: Tickq
) -> None:
    # 1. The demo's successes and its dead job on the per-minute chart
    demo = tickq("demo", "--user", "alice")
    succeeded = sum(j["status"] == "succeeded" for j in demo["jobs"])
    dead = [j["id"] for j in demo["jobs"] if j["status"] == "dead"]
    assert succeeded > 0 and len(dead) == 1
    operator = serve_as(OPERATOR).url
    page.goto(f"{operator}/ui?view=operator")
    page.wait_for_selector("#chart-throughput rect")
    drawn = page.evaluate(BARS)
    assert (drawn["succeeded"], drawn["dead"]) == (succeeded, 1)
    assert drawn["failed"] >= 1  # the flaky transcription's first attempt, at least
    expect(page.locator("#throughput-totals")).to_contain_text(f"{succeeded} succeeded")

    # 2. Paused, the default queue keeps new jobs through a tick; resumed, the next runs them
    row = page.locator('#queues tr[data-queue="default"]')
    row.locator("button.action-pause").click()
    expect(row).to_have_attribute("data-paused", "true")
    tickq("enqueue", "echo", "--payload", '{"n": 1}')
    tickq("enqueue", "echo", "--payload", '{"n": 2}')
    paused = tickq("tick")
    assert paused["claimed"] == 0
    assert statuses(conn, "echo") == ["queued", "queued"]
    assert tickq("queues", "list")[0]["paused_by"] == "olivia"
    tickq("maintain")  # a depth sample of the paused queue for the chart
    page.click("#tab-operator")
    page.wait_for_selector("#chart-depth circle")
    page.screenshot(path=ARTIFACTS / "operator-view.png")
    row.locator("button.action-resume").click()
    expect(row).to_have_attribute("data-paused", "false")
    resumed = tickq("tick")
    assert resumed["succeeded"] == 2
    assert statuses(conn, "echo") == ["succeeded", "succeeded"]

    # 3. A second demo run leaves a second dead job; both retried from the page at once
    dead += [j["id"] for j in tickq("demo", "--user", "alice")["jobs"] if j["status"] == "dead"]
    assert len(dead) == 2
    page.goto(f"{serve_as(ALICE).url}/ui?status=dead")
    page.wait_for_selector("#jobs tbody tr")
    page.check("#select-page")
    expect(page.locator("#selected-count")).to_have_text("2 selected")
    page.click("#bulk-retry")
    expect(page.locator("#message")).to_have_text("Retried 2 of 2 selected jobs")
    rows = conn.execute(
        "select status, attempts from tickq.jobs where id = any(%s)", (dead,)
    ).fetchall()
    assert rows == [("queued", 0), ("queued", 0)]


def test_the_long_jobs_steps_and_the_pipelines_three_parents(
    page: Page, conn: psycopg.Connection, serve_as: Serve, tickq: Tickq
) -> None:
    # Given the demo's long transcription (a step per part) and its pipeline: extract,
    # three embeds after it, a reindex after all three
    demo = tickq("demo", "--user", "alice")
    (long_job,) = [j for j in demo["jobs"] if j["type"] == "transcribe-long"]
    parts = long_job["payload"]["parts"]
    page.goto(f"{serve_as(OPERATOR).url}/ui?scope=all")

    # When the operator opens Alice's long job from every user's list
    page.wait_for_selector(f'tr[data-job-id="{long_job["id"]}"]')
    page.click(f'tr[data-job-id="{long_job["id"]}"] a.job-link')

    # Then it lists its steps: the fetch and every part, each with its result's size, and
    # keeps Alice's payload to herself
    steps = page.locator("#detail-steps tbody tr")
    expect(steps).to_have_count(parts + 1)
    names = steps.evaluate_all("rows => rows.map(r => r.dataset.step)")
    assert sorted(names) == sorted(["fetch", *(f"part:{i}" for i in range(parts))])
    expect(page.locator("#detail-waiting")).to_contain_text("resumed")
    expect(page.locator("#detail-payload")).to_have_text("(not shown to operators)")
    page.screenshot(path=ARTIFACTS / "job-steps.png")
    page.click("#detail-close")

    last, parents = conn.execute(
        "select d.child_id, array_agg(d.parent_id::text order by d.parent_id)"
        " from tickq.job_dependencies d group by d.child_id"
        " having count(*) = 3"
    ).fetchone()

    # When the operator opens the pipeline's last job
    page.wait_for_selector(f'tr[data-job-id="{last}"]')
    page.click(f'tr[data-job-id="{last}"] a.job-link')

    # Then the graph lists its three parents, each a link with its status
    links = page.locator("#detail-parents a.graph-link")
    expect(links).to_have_count(3)
    assert sorted(links.evaluate_all("as => as.map(a => a.dataset.jobId)")) == parents
    statuses = page.locator("#detail-parents li").evaluate_all(
        "items => items.map(i => i.dataset.status)"
    )
    assert statuses == ["succeeded"] * 3
    page.screenshot(path=ARTIFACTS / "job-graph.png")
