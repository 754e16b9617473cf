"""The operator console in a real browser: charts drawn from known data, queue pause and
resume, bulk retry, filters kept in the URL, and the list driven from the keyboard."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
from playwright.sync_api import Page, expect

from queue_core import PostgresStore, Status
from queue_core.console.charts import QueueHistory
from queue_core.model.validation import job_spec
from tickq.infra.local.serve import DevIdentity

from .conftest import ARTIFACTS, ConsoleLog, Serve

ALICE = DevIdentity("alice")
OPERATOR = DevIdentity("olivia", operator_group="tickq-operators")

# What the throughput chart draws: {bucket start: {series: count}}.
BARS = """() => Object.fromEntries([...document.querySelectorAll('#chart-throughput g.bucket')]
  .filter(g => g.children.length)
  .map(g => [g.dataset.start, Object.fromEntries([...g.querySelectorAll('rect')]
    .map(r => [r.dataset.series, Number(r.dataset.count)]))]))"""
DOTS = """(series) => [...document.querySelectorAll(`#chart-depth circle[data-series=${series}]`)]
  .map(c => [c.dataset.at, Number(c.dataset.value)])"""


def minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def finish(store: PostgresStore, n: int, at: datetime, **options: Any) -> list[UUID]:
    """n jobs claimed and succeeded at `at`."""
    ids = [
        store.enqueue(job_spec("embed", {"i": i}, **options), now=at - timedelta(seconds=2)).id
        for i in range(n)
    ]
    for job in store.claim(queues=[options.get("queue", "default")], limit=n, now=at):
        store.complete(job, {"ok": True}, now=at)
    return ids


def kill(store: PostgresStore, at: datetime, *, user: DevIdentity | None = None) -> UUID:
    spec = job_spec(
        "transcribe",
        {"audio": "standup.m4a"},
        max_attempts=1,
        user_id=None if user is None else user.owner_id(),
    )
    job_id = store.enqueue(spec, now=at - timedelta(seconds=2)).id
    (job,) = store.claim(limit=1, now=at)
    store.fail(job, "TimeoutError: speech API timed out", now=at)
    return job_id


def open_operator(page: Page, url: str) -> None:
    page.goto(f"{url}/ui?view=operator")
    page.wait_for_selector("#queues tbody tr")
    page.wait_for_selector("#chart-throughput svg")


def test_the_charts_draw_finished_jobs_and_depth_from_known_data(
    page: Page, conn: psycopg.Connection, serve_as: Serve, console_log: ConsoleLog
) -> None:
    # Given, ten and three minutes ago: three successes, a retried failure, a dead job
    store = PostgresStore(conn)
    now = store.now()
    ten, three = minute(now) - timedelta(minutes=10), minute(now) - timedelta(minutes=3)
    finish(store, 3, ten + timedelta(seconds=5))
    retried = store.enqueue(job_spec("embed", {}, max_attempts=2, queue="slow"), now=ten).id
    (job,) = store.claim(queues=["slow"], limit=1, now=ten + timedelta(seconds=6))
    store.fail(job, "flaky", now=ten + timedelta(seconds=7))
    kill(store, three + timedelta(seconds=1))
    # and two depth samples of both queues: 4 + 1 waiting, then 4 + 0
    history = QueueHistory(conn)
    store.enqueue_many([job_spec("embed", {"w": i}) for i in range(4)], now=now)
    history.record_depth(store.stats(now=now), now=ten)
    store.cancel(retried)
    history.record_depth(store.stats(now=now), now=three)

    # When the operator opens the operator view
    open_operator(page, serve_as(OPERATOR).url)

    # Then the per-minute chart has exactly those bars, and the depth chart those points
    bars = {datetime.fromisoformat(k): v for k, v in page.evaluate(BARS).items()}
    assert bars == {ten: {"succeeded": 3, "failed": 1}, three: {"dead": 1}}
    expect(page.locator("#throughput-totals")).to_have_text(
        "(3 succeeded, 1 failed and retried, 1 dead)"
    )
    depth = [(datetime.fromisoformat(at), v) for at, v in page.evaluate(DOTS, "depth")]
    assert depth == [(ten, 5), (three, 4)]
    assert len(page.locator("#chart-age circle").all()) == 2
    assert not console_log.problems()

    # And the hour-per-bar chart of the last day puts them together
    page.select_option("#chart-window", "day")
    page.wait_for_function(
        "() => document.querySelectorAll('#chart-throughput g.bucket').length === 24"
    )
    day = page.evaluate(BARS)
    assert sum(s.get("succeeded", 0) for s in day.values()) == 3
    assert sum(s.get("dead", 0) for s in day.values()) == 1
    assert "window=day" in page.url


def test_pausing_and_resuming_a_queue_from_the_page(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    # Given a queue with a waiting job
    store = PostgresStore(conn)
    store.enqueue(job_spec("embed", {}))
    open_operator(page, serve_as(OPERATOR).url)
    row = page.locator('#queues tr[data-queue="default"]')

    # When the operator pauses it
    row.locator("button.action-pause").click()

    # Then the page shows who paused it, and no claim takes its job
    expect(row).to_have_attribute("data-paused", "true")
    expect(row.locator("td.paused")).to_contain_text("paused by olivia")
    assert PostgresStore(conn).claim(limit=10) == []

    # When they resume it, the next claim takes the job
    row.locator("button.action-resume").click()
    expect(row).to_have_attribute("data-paused", "false")
    assert len(PostgresStore(conn).claim(limit=10)) == 1


def test_bulk_retry_of_selected_dead_jobs(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    # Given three dead jobs of Alice
    store = PostgresStore(conn)
    now = store.now()
    dead = [kill(store, now, user=ALICE) for _ in range(3)]
    page.goto(f"{serve_as(ALICE).url}/ui?status=dead")
    page.wait_for_selector("#jobs tbody tr")

    # When she selects two of them and clicks "Retry selected"
    for job_id in dead[:2]:
        page.check(f'tr[data-job-id="{job_id}"] input.select')
    expect(page.locator("#selected-count")).to_have_text("2 selected")
    page.click("#bulk-retry")

    # Then both go back to the queue in one request, reported per job; the third stays dead
    expect(page.locator("#message")).to_have_text("Retried 2 of 2 selected jobs")
    outcomes = page.locator("#bulk-results li").evaluate_all(
        "items => items.map(i => [i.dataset.jobId, i.dataset.outcome])"
    )
    assert sorted(outcomes) == sorted([str(i), "retried"] for i in dead[:2])
    assert [store.get(i).status for i in dead] == [Status.QUEUED, Status.QUEUED, Status.DEAD]


def test_the_url_keeps_the_filter(page: Page, conn: psycopg.Connection, serve_as: Serve) -> None:
    store = PostgresStore(conn)
    now = store.now()
    kill(store, now, user=ALICE)
    store.enqueue(job_spec("embed", {}, user_id=ALICE.owner_id()))
    url = serve_as(ALICE).url
    page.goto(f"{url}/ui")
    page.wait_for_selector("#jobs tbody tr")

    page.fill("#filter-error", "speech API")
    page.click("#filters button[type=submit]")

    page.wait_for_function("() => document.querySelectorAll('#jobs tbody tr').length === 1")
    assert "error=speech+API" in page.url
    # A second tab opened on that link shows the same list
    shared = page.context.new_page()
    shared.goto(page.url)
    shared.wait_for_selector("#jobs tbody tr")
    expect(shared.locator("#filter-error")).to_have_value("speech API")
    expect(shared.locator("#jobs tbody tr")).to_have_count(1)
    expect(shared.locator("#jobs tbody tr")).to_have_attribute("data-status", "dead")


def test_the_list_works_from_the_keyboard(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    # Given three jobs of Alice, newest first
    store = PostgresStore(conn)
    ids = [
        store.enqueue(job_spec("embed", {"doc": i}, user_id=ALICE.owner_id())).id for i in range(3)
    ]
    page.goto(f"{serve_as(ALICE).url}/ui")
    page.wait_for_selector("#jobs tbody tr")
    order = page.locator("#jobs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.jobId)")
    assert sorted(order) == sorted(str(i) for i in ids)

    # When she moves down twice, selects with space, moves up and selects with x
    page.locator("body").click(position={"x": 5, "y": 5})
    for key in ("ArrowDown", "j", "Space", "k", "x"):
        page.keyboard.press(key)

    # Then the second and first rows are selected and focus is on the first
    expect(page.locator("#selected-count")).to_have_text("2 selected")
    selected = page.locator("#jobs tbody tr.selected").evaluate_all(
        "rows => rows.map(r => r.dataset.jobId)"
    )
    assert selected == order[:2]
    assert page.evaluate("document.activeElement.dataset.jobId") == order[0]

    # And Enter opens the focused job's detail
    page.keyboard.press("Enter")
    expect(page.locator("#detail")).to_be_visible()
    expect(page.locator("#detail-title")).to_contain_text(order[0])


def test_operators_retry_all_dead_of_a_type_after_confirming_the_count(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    store = PostgresStore(conn)
    now = store.now()
    dead = [kill(store, now, user=ALICE), kill(store, now)]
    open_operator(page, serve_as(OPERATOR).url)

    page.fill("#dead-type", "transcribe")
    page.click("#dead-count")
    expect(page.locator("#dead-found")).to_have_text("2 dead jobs match")
    page.click("#dead-confirm")

    expect(page.locator("#message")).to_have_text("Retried 2 of 2 selected jobs")
    assert [store.get(i).status for i in dead] == [Status.QUEUED, Status.QUEUED]
    page.screenshot(path=ARTIFACTS / "operator-console.png", full_page=True)


def test_setting_holding_and_clearing_flow_limits_from_the_page(
    page: Page, conn: psycopg.Connection, serve_as: Serve, console_log: ConsoleLog
) -> None:
    # Given two jobs of one shop's key
    store = PostgresStore(conn)
    for _ in range(2):
        store.enqueue(job_spec("sync", {}, flow_keys=["shop:acme"]))
    open_operator(page, serve_as(OPERATOR).url)

    # When the operator caps the shop: prefix at one job per key and holds the key
    page.fill("#flow-prefix", "shop:")
    page.fill("#flow-max-running", "1")
    page.fill("#flow-rate", "10/min")
    page.click("#flow-set-button")
    limit = page.locator('#flow-limits tr[data-prefix="shop:"]')
    expect(limit).to_contain_text("10 per 60 s")
    page.fill("#flow-hold-key", "shop:acme")
    page.fill("#flow-hold-seconds", "300")
    page.click("#flow-hold-button")

    # Then the key shows its waiting jobs, its prefix and its hold, and no claim takes them
    key = page.locator('#flow-keys tr[data-key="shop:acme"]')
    expect(key.locator("td").nth(1)).to_have_text("shop:")
    expect(key.locator("td").nth(3)).to_have_text("2")
    expect(key.locator("td").nth(4)).not_to_have_text("")
    assert PostgresStore(conn).claim(limit=10) == []

    # When they clear the limit, its row goes
    limit.locator("button.action-clear").click()
    expect(page.locator('#flow-limits tr[data-prefix="shop:"]')).to_have_count(0)
    assert conn.execute("select count(*) from tickq.flow_limits").fetchone() == (0,)
    assert not console_log.problems()
