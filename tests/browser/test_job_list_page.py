"""The job list page in a real browser, against ApiFunction served as `tickq serve` does."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import psycopg
import pytest
from playwright.sync_api import Page, expect

import queue_core
from queue_core import PostgresStore, Registry, Status
from tickq.infra.local.serve import DevIdentity

from .conftest import ARTIFACTS, ConsoleLog, Serve

ALICE = DevIdentity("alice")
BOB = DevIdentity("bob")
OPERATOR = DevIdentity("olivia", operator_group="tickq-operators")

ROWS = (
    "() => Object.fromEntries([...document.querySelectorAll('#jobs tbody tr')]"
    ".map(r => [r.dataset.jobId, r.dataset.status]))"
)


def seed(conn: psycopg.Connection) -> dict[str, UUID]:
    """Alice has a dead, a succeeded and a queued job; Bob has one queued job."""
    store = PostgresStore(conn)
    specs = Registry()

    def add(owner: DevIdentity, type_: str, payload: dict[str, Any], **options: Any) -> UUID:
        spec = specs.spec(type_, payload, user_id=owner.owner_id(), **options)
        return store.enqueue(spec).id

    dead = add(ALICE, "transcribe", {"audio": "standup.m4a"}, priority=10, max_attempts=1)
    (claimed,) = store.claim(limit=1)
    store.fail(claimed, "TimeoutError: speech API timed out after 30 s")
    done = add(ALICE, "embed", {"doc": "handbook.pdf"}, priority=9)
    (claimed,) = store.claim(limit=1)
    store.complete(claimed, {"vectors": 20})
    queued = add(ALICE, "reindex", {"index": "docs"})
    bobs = add(BOB, "embed", {"doc": "bob-private.pdf"})
    return {"dead": dead, "succeeded": done, "queued": queued, "bob": bobs}


def rows(page: Page) -> dict[str, str]:
    return dict(page.evaluate(ROWS) or {})


def open_page(page: Page, url: str, path: str = "/ui") -> None:
    page.goto(f"{url}{path}")
    page.wait_for_selector("#jobs tbody tr")


def test_page_lists_only_the_signed_in_users_jobs(
    page: Page, conn: psycopg.Connection, serve_as: Serve, console_log: ConsoleLog
) -> None:
    # Given jobs of Alice and Bob
    ids = seed(conn)
    server = serve_as(ALICE)

    # When Alice opens the page
    open_page(page, server.url)

    # Then she sees her three jobs in their states, and not Bob's
    assert rows(page) == {
        str(ids["dead"]): "dead",
        str(ids["succeeded"]): "succeeded",
        str(ids["queued"]): "queued",
    }
    assert str(ids["bob"]) not in page.inner_text("body")
    expect(page.locator("#who")).to_have_text("signed in as alice")
    expect(page.locator("#tab-operator")).to_be_hidden()
    expect(page.locator("#scope-label")).to_be_hidden()  # only operators list everyone's
    assert not console_log.problems()


def test_a_dead_job_retried_from_the_page_goes_back_to_the_queue(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    # Given Alice's dead job on the page
    ids = seed(conn)
    server = serve_as(ALICE)
    open_page(page, server.url)
    dead = str(ids["dead"])

    # When she clicks its Retry button
    page.click(f'tr[data-job-id="{dead}"] button.action-retry')

    # Then its row changes to queued, and so does the job in the table
    expect(page.locator(f'tr[data-job-id="{dead}"]')).to_have_attribute("data-status", "queued")
    job = PostgresStore(conn).get(dead)
    assert (job.status, job.attempts) == (Status.QUEUED, 0)
    assert job.errors[-1]["error"] == "TimeoutError: speech API timed out after 30 s"
    expect(page.locator("#message")).to_contain_text("Retried transcribe job")
    page.screenshot(path=ARTIFACTS / "job-list.png")


def test_detail_view_shows_payload_and_result(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    ids = seed(conn)
    server = serve_as(ALICE)
    open_page(page, server.url)

    page.click(f'tr[data-job-id="{ids["succeeded"]}"] a.job-link')

    expect(page.locator("#detail")).to_be_visible()
    expect(page.locator("#detail-payload")).to_contain_text('"handbook.pdf"')
    expect(page.locator("#detail-result")).to_contain_text('"vectors": 20')


def test_detail_view_links_a_job_to_its_parents_and_children(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    # Given Alice's pipeline: extract, then embed after it
    owner = ALICE.owner_id()
    extract = queue_core.enqueue(conn, "extract", {"doc": "a.pdf"}, user_id=owner).id
    embed = queue_core.enqueue(conn, "embed", after=[extract], user_id=owner).id
    server = serve_as(ALICE)
    open_page(page, server.url)
    assert rows(page)[str(embed)] == "waiting"

    # When she opens the waiting job, then follows its parent's link
    page.click(f'tr[data-job-id="{embed}"] a.job-link')
    expect(page.locator("#detail-parents")).to_contain_text(str(extract)[-8:])
    expect(page.locator("#detail-fields")).to_contain_text("waiting")
    expect(page.locator("#detail-children")).to_have_text("none")
    page.screenshot(path=ARTIFACTS / "job-list-graph.png")
    page.click(f'#detail-parents a[data-job-id="{extract}"]')

    # Then the dialog shows the parent, with the waiting job among its children
    expect(page.locator("#detail-title")).to_contain_text(str(extract))
    expect(page.locator("#detail-children")).to_contain_text(str(embed)[-8:])
    expect(page.locator("#detail-children")).to_contain_text("waiting")


def test_status_filter_narrows_the_list(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    ids = seed(conn)
    server = serve_as(ALICE)
    open_page(page, server.url)

    page.select_option("#filter-status", "dead")

    page.wait_for_function(
        f"() => ({ROWS})()[{str(ids['dead'])!r}] === 'dead'"
        " && document.querySelectorAll('#jobs tbody tr').length === 1"
    )


@pytest.mark.parametrize("identity", [OPERATOR], ids=["operator"])
def test_operator_view_counts_every_users_jobs_per_queue(
    page: Page, conn: psycopg.Connection, serve_as: Serve, identity: DevIdentity
) -> None:
    # Given Alice's and Bob's jobs, and an operator who owns none
    seed(conn)
    server = serve_as(identity)
    page.goto(f"{server.url}/ui")
    expect(page.locator("#tab-operator")).to_be_visible()

    # When the operator opens the operator view
    page.click("#tab-operator")
    page.wait_for_selector("#queues tbody tr td")
    queue = page.locator("#queues tbody tr").first.locator("td").all_inner_texts()

    # Then the default queue shows both users' jobs: 2 waiting, 1 dead, 4 in all
    name, depth, oldest, after_parents, running, retrying, dead, total = queue[:8]
    assert (name, depth, running, retrying, dead, total) == ("default", "2", "0", "0", "1", "4")
    assert after_parents == "0"
    assert oldest.endswith(("s", "min", "h"))
    # And each user's waiting job shows under the user's fairness group
    page.wait_for_selector("#groups tbody tr")
    groups = page.evaluate(
        "[...document.querySelectorAll('#groups tbody tr')]"
        ".map(r => [...r.cells].map(c => c.textContent))"
    )
    assert sorted((g[1], g[2], g[3]) for g in groups) == sorted(
        (str(who.owner_id()), "1", "0") for who in (ALICE, BOB)
    )
    page.screenshot(path=ARTIFACTS / "operator-queues.png")


def stored_token(page: Page) -> Any:
    return page.evaluate("sessionStorage.getItem('tickq-token')")


def test_a_token_in_a_link_is_taken_only_from_the_pages_own_sign_in(
    page: Page, serve_as: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a deployment whose sign-in page is configured
    server = serve_as(ALICE)
    monkeypatch.setenv("TICKQ_SIGN_IN_URL", f"{server.url}/ui?signed-in=1")

    # When someone opens a link carrying their own token (login CSRF)
    page.goto(f"{server.url}/ui?from=link#id_token=mallorys-token&state=guess")
    # Then the page keeps no token and drops it from the address bar
    assert stored_token(page) is None
    assert "mallorys-token" not in page.url

    # When the user starts the page's own sign-in
    expect(page.locator("#sign-in")).to_be_visible()
    page.evaluate("document.getElementById('sign-in').click()")
    page.wait_for_function("() => new URL(window.location.href).searchParams.get('state')")
    state = page.evaluate("new URL(window.location.href).searchParams.get('state')")
    # and the sign-in page sends the browser back with a token and that state
    page.goto(f"{server.url}/ui?back=1#id_token=alices-token&state={state}")
    # Then that token is kept, once
    page.wait_for_function("() => sessionStorage.getItem('tickq-token') === 'alices-token'")
    assert page.evaluate("sessionStorage.getItem('tickq-sign-in-state')") is None
