"""The operator's view of every user's jobs in a real browser: another user's durable job
with its steps and graph and none of its data, the owner and group columns, one time
format with its zone, a succeeded job's settled state, the charts' layout and day axis, and
the fairness table when no group waits."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import psycopg
import pytest
from playwright.sync_api import Browser, Page, Response, expect

from queue_core import PostgresStore
from queue_core.model.timed_out import timed_out_error
from queue_core.model.validation import job_spec
from tests.operator_scenes import Pipeline, durable_pipeline, leaked
from tickq.infra.local.serve import DevIdentity

from .conftest import TIMEOUT_MS, ConsoleLog, Serve

ALICE = DevIdentity("alice")
OPERATOR = DevIdentity("olivia", operator_group="tickq-operators")
ZONE = "Asia/Tokyo"  # the browser's zone: UTC+9 all year, so the stated zone is known
A_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\+9$")
STEP_NAMES = "rows => rows.map(r => r.dataset.step)"


class Answers(list[tuple[int, str]]):
    """Every HTTP answer the page got: (status, path)."""

    def failed(self) -> list[tuple[int, str]]:
        return [(status, path) for status, path in self if status >= 400]


@pytest.fixture
def answers() -> Answers:
    return Answers()


@pytest.fixture
def page(browser: Browser, console_log: ConsoleLog, answers: Answers) -> Iterator[Page]:
    """A tab whose clock is in Tokyo, recording the console and every answer."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, timezone_id=ZONE)
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    tab.on("console", lambda message: console_log.append(f"{message.type}: {message.text}"))
    tab.on("pageerror", lambda error: console_log.append(f"exception: {error}"))

    def answered(response: Response) -> None:
        path = response.url.split("//", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
        answers.append((response.status, "/" + path))

    tab.on("response", answered)
    try:
        yield tab
    finally:
        context.close()


def axis(page: Page, chart: str) -> list[str]:
    """The time labels under a chart, left to right (SVG text has no innerText)."""
    labels = page.locator(f"#chart-{chart} text.time")
    return list(labels.evaluate_all("ts => ts.map(t => t.textContent)"))


def open_every_users_list(page: Page, url: str) -> None:
    page.goto(f"{url}/ui?scope=all")
    page.wait_for_selector("#jobs tbody tr")


def alices_pipeline_before_the_operator(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> Pipeline:
    """Alice's durable pipeline, and the operator's list of every user's jobs open."""
    pipeline = durable_pipeline(conn, ALICE.owner_id())
    open_every_users_list(page, serve_as(OPERATOR).url)
    return pipeline


def open_detail(page: Page, job_id: object) -> None:
    page.click(f'tr[data-job-id="{job_id}"] a.job-link')
    expect(page.locator("#detail")).to_be_visible()
    expect(page.locator("#detail-title")).to_contain_text(str(job_id))


def test_the_operator_sees_another_users_steps_and_none_of_their_data(
    page: Page, conn: psycopg.Connection, serve_as: Serve, console_log: ConsoleLog, answers: Answers
) -> None:
    # Given Alice's durable job: two steps stored, a signal kept, waiting for "approve"
    pipeline = alices_pipeline_before_the_operator(page, conn, serve_as)

    # When the operator opens it from every user's list
    open_detail(page, pipeline.job)

    # Then the detail lists its steps and what it waits for, and whose job it is
    steps = page.locator("#detail-steps tbody tr")
    expect(steps).to_have_count(2)
    assert steps.evaluate_all(STEP_NAMES) == ["fetch", "part:0"]
    expect(page.locator("#detail-waiting")).to_contain_text("waiting: signal 'approve'")
    # It suspended once and has not resumed yet: no "resumed" count.
    expect(page.locator("#detail-waiting")).not_to_contain_text("resumed")
    # And the code version its last run ran under
    expect(page.locator("#detail-waiting")).to_contain_text("last ran under code v2")
    owner = page.locator('#detail-fields dd[data-field="user_id"]')
    expect(owner).to_have_text(str(ALICE.owner_id()))
    # And none of Alice's data, anywhere on the page: payload, result, a step's result
    expect(page.locator("#detail-payload")).to_have_text("(not shown to operators)")
    expect(page.locator("#detail-result")).to_have_text("(not shown to operators)")
    assert leaked(page.content()) == []
    # And it came straight from the operator's route: no 404 first, nothing logged
    detail_paths = [path for _, path in answers if path.endswith(f"/jobs/{pipeline.job}")]
    assert detail_paths == [f"/admin/jobs/{pipeline.job}"]
    assert answers.failed() == []
    assert console_log.problems() == []


def test_the_operator_follows_another_users_graph(
    page: Page, conn: psycopg.Connection, serve_as: Serve, console_log: ConsoleLog, answers: Answers
) -> None:
    # Given Alice's extract → transcribe → embed
    pipeline = alices_pipeline_before_the_operator(page, conn, serve_as)

    # When the operator opens the waiting embed job
    open_detail(page, pipeline.child)

    # Then its graph links its parent, with its status, and it has no children
    parent = page.locator(
        f'#detail-parents li[data-status="queued"] a[data-job-id="{pipeline.job}"]'
    )
    expect(parent).to_have_count(1)
    expect(page.locator("#detail-children")).to_have_text("none")

    # When they follow the link to the parent
    parent.click()

    # Then the dialog shows the durable job between its own parent and the embed
    expect(page.locator("#detail-title")).to_contain_text(str(pipeline.job))
    expect(page.locator(f'#detail-parents a[data-job-id="{pipeline.parent}"]')).to_have_count(1)
    expect(page.locator(f'#detail-children a[data-job-id="{pipeline.child}"]')).to_have_count(1)
    expect(page.locator("#detail-steps tbody tr")).to_have_count(2)
    assert leaked(page.content()) == []
    assert answers.failed() == [] and console_log.problems() == []


def test_the_list_has_owner_and_group_and_one_time_format_with_its_zone(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    # Given a job of Alice's in a fairness group of her tenant
    store = PostgresStore(conn)
    spec = job_spec("embed", {}, user_id=ALICE.owner_id(), group="alice/docs")
    job = store.get(store.enqueue(spec).id)
    open_every_users_list(page, serve_as(OPERATOR).url)
    row = page.locator(f'tr[data-job-id="{job.id}"]')

    # Then its row names the owner and the group
    expect(row.locator("td.owner")).to_have_text("…" + str(ALICE.owner_id())[-8:])
    expect(row.locator("td.owner")).to_have_attribute("title", str(ALICE.owner_id()))
    expect(row.locator("td.group")).to_have_text("alice/docs")
    headers = page.locator("#jobs thead th").all_inner_texts()
    assert [h.lower() for h in headers[1:6]] == ["job", "type", "queue", "owner", "group"]

    # And the list and the detail write its creation time alike, in the browser's zone
    created = job.created_at.astimezone(ZoneInfo(ZONE)).strftime("%Y-%m-%d %H:%M:%S UTC+9")
    listed = row.locator("td").nth(9).inner_text()
    open_detail(page, job.id)
    detailed = page.locator('#detail-fields dd[data-field="created_at"]').inner_text()
    assert listed == detailed == created
    assert A_TIME.match(page.locator('#detail-fields dd[data-field="run_after"]').inner_text())


def test_a_succeeded_job_shows_neither_its_last_progress_nor_an_earlier_failure(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    # Given a job that reported 3/10, failed, and then succeeded on its second attempt
    store = PostgresStore(conn)
    now = store.now()
    job = store.enqueue(job_spec("embed", {}, max_attempts=2, user_id=ALICE.owner_id()), now=now)
    (first,) = store.claim(limit=1, now=now)
    assert first.lease_token is not None
    store.report_progress(first.id, first.lease_token, {"done": 3, "of": 10}, now=now)
    store.fail(first, "ConnectionError: index unreachable", now=now)
    (second,) = store.claim(limit=1, now=now + timedelta(minutes=10))
    store.complete(second, {"ok": True}, now=now + timedelta(minutes=10))
    open_every_users_list(page, serve_as(OPERATOR).url)
    row = page.locator(f'tr[data-job-id="{job.id}"]')

    # Then the list shows it done, with no error; the detail keeps the failure in its history
    expect(row).to_have_attribute("data-status", "succeeded")
    expect(row.locator("td").nth(8)).to_have_text("done")
    expect(row.locator("td.error-text")).to_have_text("")
    open_detail(page, job.id)
    expect(page.locator('#detail-fields dd[data-field="error"]')).to_have_text("—")
    history = page.locator("#detail-errors").inner_text()
    assert history.startswith("#1 ") and "ConnectionError: index unreachable" in history
    assert A_TIME.match(history.split("  ")[0].removeprefix("#1 "))


def test_the_charts_share_their_rows_and_the_day_view_names_the_day(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    # Given no live job at all, and the operator view open
    page.goto(f"{serve_as(OPERATOR).url}/ui?view=operator")
    page.wait_for_selector("#chart-throughput svg")

    # Then the fairness table says there is none
    expect(page.locator("#groups tbody tr")).to_have_count(1)
    expect(page.locator("#groups tbody tr")).to_have_text("none")
    # And no chart sits alone in a row: the first spans the width, the other two share one
    boxes = [
        page.locator(f"#chart-{name}").locator("xpath=..").bounding_box()
        for name in ("throughput", "depth", "age")
    ]
    first, depth, age = (b for b in boxes if b is not None)
    assert depth["y"] == age["y"] > first["y"]
    assert depth["x"] == first["x"] and age["x"] > depth["x"]
    assert abs(age["x"] + age["width"] - (first["x"] + first["width"])) < 1
    expect(page.locator("#chart-zone")).to_contain_text("UTC+9")
    hourly = axis(page, "depth")
    assert hourly and all(re.fullmatch(r"\d\d:\d\d", label) for label in hourly)

    # When they switch to the last day
    page.select_option("#chart-window", "day")
    page.wait_for_function(
        "() => document.querySelectorAll('#chart-throughput g.bucket').length === 24"
    )

    # Then every time on its axes says which day; the sampled charts end today (the axis's
    # last tick, the end of the current hour, is tomorrow's midnight in the day's last hour)
    today = datetime.now(ZoneInfo(ZONE))
    ends = today + timedelta(hours=1)
    days = {f"{d:%b} {d.day}" for d in (today - timedelta(days=1), today, ends)}
    for chart in ("throughput", "depth", "age"):
        labels = axis(page, chart)
        assert labels and all(" ".join(label.split()[:2]) in days for label in labels), labels
    for chart in ("depth", "age"):
        last = axis(page, chart)[-1]
        assert last.startswith(f"{today:%b} {today.day} "), last


def test_the_detail_shows_the_timeout_and_how_a_timed_out_attempt_was_stopped(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    # Given a job with a 2 s timeout whose process-isolated handler was killed at it
    store = PostgresStore(conn)
    now = store.now()
    job = store.enqueue(job_spec("convert", {}, timeout=2, user_id=ALICE.owner_id()), now=now)
    (claimed,) = store.claim(limit=1, now=now)
    store.fail(claimed, timed_out_error(2, "killed"), now=now)
    open_every_users_list(page, serve_as(OPERATOR).url)

    # When the operator opens it
    open_detail(page, job.id)

    # Then its timeout and the way its attempt ended are fields of their own
    expect(page.locator('#detail-fields dd[data-field="timeout_seconds"]')).to_have_text("2 s")
    expect(page.locator('#detail-fields dd[data-field="timed_out"]')).to_have_text(
        "after 2 s, killed"
    )


def test_the_operators_detail_says_which_flow_key_holds_a_job(
    page: Page, conn: psycopg.Connection, serve_as: Serve, console_log: ConsoleLog
) -> None:
    # Given Alice's job of a held key, and one of a free key
    from queue_core.policies.flow_limits import FlowLimits

    store = PostgresStore(conn)
    owner = ALICE.owner_id()
    held = store.enqueue(job_spec("sync", {}, flow_keys=["shop:acme"], user_id=owner)).id
    free = store.enqueue(job_spec("sync", {}, flow_keys=["shop:other"], user_id=owner)).id
    FlowLimits(conn).hold("shop:acme", 600)
    open_every_users_list(page, serve_as(OPERATOR).url)

    # When the operator opens each, the held one says its key and the other says nothing
    open_detail(page, held)
    expect(page.locator("#detail-flow")).to_have_text("held by flow key shop:acme")
    page.click("#detail-close")
    open_detail(page, free)
    expect(page.locator("#detail-flow")).to_have_count(0)
    assert console_log.problems() == []
