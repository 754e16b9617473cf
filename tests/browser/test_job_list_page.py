"""The job list page in a real browser, against ApiFunction served as `tickq serve` does."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import psycopg
import pytest

import queue_core
from infra.serve import DevIdentity
from queue_core import PostgresStore, Registry, Status

from .cdp import Page, wait_for
from .conftest import ARTIFACTS, Serve

ALICE = DevIdentity("alice")
BOB = DevIdentity("bob")
OPERATOR = DevIdentity("olivia", operator_group="tickq-operators")

ROWS = (
    "[...document.querySelectorAll('#jobs tbody tr')].map(r => [r.dataset.jobId, r.dataset.status])"
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


def text(page: Page, element_id: str) -> str:
    return str(page.evaluate(f"document.getElementById('{element_id}').textContent"))


def rows(page: Page) -> dict[str, str]:
    return dict(page.evaluate(ROWS) or [])


def open_page(page: Page, url: str) -> dict[str, str]:
    page.goto(f"{url}/ui")
    return wait_for(lambda: rows(page), what="the job rows")


def test_page_lists_only_the_signed_in_users_jobs(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    # Given jobs of Alice and Bob
    ids = seed(conn)
    server = serve_as(ALICE)

    # When Alice opens the page
    shown = open_page(page, server.url)

    # Then she sees her three jobs in their states, and not Bob's
    assert shown == {
        str(ids["dead"]): "dead",
        str(ids["succeeded"]): "succeeded",
        str(ids["queued"]): "queued",
    }
    assert str(ids["bob"]) not in page.evaluate("document.body.innerText")
    assert text(page, "who") == "signed in as alice"
    assert page.evaluate("document.getElementById('tab-operator').hidden") is True
    assert not [line for line in page.console if line.startswith(("error", "exception"))]


def test_a_dead_job_retried_from_the_page_goes_back_to_the_queue(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    # Given Alice's dead job on the page
    ids = seed(conn)
    server = serve_as(ALICE)
    open_page(page, server.url)
    dead = str(ids["dead"])
    page.screenshot(ARTIFACTS / "job-list-before-retry.png")

    # When she clicks its Retry button
    page.click(f'tr[data-job-id="{dead}"] button.action-retry')

    # Then its row changes to queued, and so does the job in the table
    wait_for(lambda: rows(page).get(dead) == "queued", what="the retried row to be queued")
    job = PostgresStore(conn).get(dead)
    assert (job.status, job.attempts) == (Status.QUEUED, 0)
    assert job.errors[-1]["error"] == "TimeoutError: speech API timed out after 30 s"
    assert "Retried transcribe job" in text(page, "message")
    page.screenshot(ARTIFACTS / "job-list.png")


def test_detail_view_shows_payload_and_result(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    ids = seed(conn)
    server = serve_as(ALICE)
    open_page(page, server.url)

    page.click(f'tr[data-job-id="{ids["succeeded"]}"] a.job-link')

    wait_for(lambda: page.evaluate("document.getElementById('detail').open"), what="the detail")
    assert '"handbook.pdf"' in text(page, "detail-payload")
    assert '"vectors": 20' in text(page, "detail-result")


def test_detail_view_links_a_job_to_its_parents_and_children(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    # Given Alice's pipeline: extract, then embed after it
    owner = ALICE.owner_id()
    extract = queue_core.enqueue(conn, "extract", {"doc": "a.pdf"}, user_id=owner).id
    embed = queue_core.enqueue(conn, "embed", after=[extract], user_id=owner).id
    server = serve_as(ALICE)
    assert open_page(page, server.url)[str(embed)] == "waiting"

    # When she opens the waiting job, then follows its parent's link
    page.click(f'tr[data-job-id="{embed}"] a.job-link')
    wait_for(lambda: str(extract)[-8:] in text(page, "detail-parents"), what="the parent link")
    assert "waiting" in text(page, "detail-fields") and text(page, "detail-children") == "none"
    page.screenshot(ARTIFACTS / "job-graph.png")
    page.click(f'#detail-parents a[data-job-id="{extract}"]')

    # Then the dialog shows the parent, with the waiting job among its children
    wait_for(lambda: str(extract) in text(page, "detail-title"), what="the parent's detail")
    assert str(embed)[-8:] in text(page, "detail-children")
    assert "waiting" in text(page, "detail-children")


def test_status_filter_narrows_the_list(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    ids = seed(conn)
    server = serve_as(ALICE)
    open_page(page, server.url)

    page.evaluate(
        "(() => { const s = document.getElementById('filter-status'); s.value = 'dead';"
        " s.dispatchEvent(new Event('change')); })()"
    )

    wait_for(lambda: rows(page) == {str(ids["dead"]): "dead"}, what="only the dead job")


@pytest.mark.parametrize("identity", [OPERATOR], ids=["operator"])
def test_operator_view_counts_every_users_jobs_per_queue(
    page: Page, conn: psycopg.Connection, serve_as: Serve, identity: DevIdentity
) -> None:
    # Given Alice's and Bob's jobs, and an operator who owns none
    seed(conn)
    server = serve_as(identity)
    page.goto(f"{server.url}/ui")
    wait_for(
        lambda: page.evaluate("!document.getElementById('tab-operator').hidden"),
        what="the operator tab",
    )

    # When the operator opens the operator view
    page.click("#tab-operator")
    queue = wait_for(
        lambda: page.evaluate(
            "[...document.querySelectorAll('#queues tbody tr td')].map(c => c.textContent)"
        ),
        what="the queue rows",
    )

    # Then the default queue shows both users' jobs: 2 waiting, 1 dead, 4 in all
    name, depth, oldest, after_parents, running, retrying, dead, total = queue
    assert (name, depth, running, retrying, dead, total) == ("default", "2", "0", "0", "1", "4")
    assert after_parents == "0"
    assert oldest.endswith(("s", "min", "h"))
    # And each user's waiting job shows under the user's fairness group
    groups = wait_for(
        lambda: page.evaluate(
            "[...document.querySelectorAll('#groups tbody tr')]"
            ".map(r => [...r.cells].map(c => c.textContent))"
        ),
        what="the group rows",
    )
    assert sorted((g[1], g[2], g[3]) for g in groups) == sorted(
        (str(who.owner_id()), "1", "0") for who in (ALICE, BOB)
    )
    page.screenshot(ARTIFACTS / "operator-view.png")


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
    wait_for(lambda: rows(page) is not None, what="the page")
    # Then the page keeps no token and drops it from the address bar
    assert stored_token(page) is None
    assert "mallorys-token" not in page.evaluate("window.location.href")

    # When the user starts the page's own sign-in
    wait_for(lambda: page.evaluate("!document.getElementById('sign-in').hidden"), what="button")
    page.evaluate("document.getElementById('sign-in').click()")
    state = wait_for(
        lambda: page.evaluate("new URL(window.location.href).searchParams.get('state')"),
        what="the sign-in redirect",
    )
    # and the sign-in page sends the browser back with a token and that state
    page.goto(f"{server.url}/ui?back=1#id_token=alices-token&state={state}")
    # Then that token is kept, once
    wait_for(lambda: stored_token(page) == "alices-token", what="the token")
    assert page.evaluate("sessionStorage.getItem('tickq-sign-in-state')") is None
