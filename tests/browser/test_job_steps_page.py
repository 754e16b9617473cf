"""The job page's detail view lists a job's durable steps and what it waits for."""

from __future__ import annotations

import psycopg
from playwright.sync_api import Page, expect

from queue_core import PostgresStore, Registry, StepStore
from queue_core.model.steps import FOREVER, WaitKind

from .conftest import Serve
from .test_job_list_page import ALICE, open_page


def test_detail_view_lists_the_steps_and_the_wait(
    page: Page, conn: psycopg.Connection, serve_as: Serve
) -> None:
    store = PostgresStore(conn)
    spec = Registry().spec("transcribe", {"audio": "all-hands.m4a"}, user_id=ALICE.owner_id())
    job_id = store.enqueue(spec).id
    (claimed,) = store.claim(limit=1)
    assert claimed.lease_token is not None
    steps = StepStore(store)
    steps.complete(job_id, claimed.lease_token, "fetch", '{"parts": 2}')
    steps.complete(job_id, claimed.lease_token, "part:0", "900")
    steps.suspend(job_id, claimed.lease_token, kind=WaitKind.SIGNAL, name="approve", until=FOREVER)
    server = serve_as(ALICE)
    open_page(page, server.url)

    page.click(f'tr[data-job-id="{job_id}"] a.job-link')

    expect(page.locator("#detail")).to_be_visible()
    expect(page.locator("#detail-steps tbody tr")).to_have_count(2)
    names = page.locator("#detail-steps tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.step)"
    )
    assert sorted(names) == ["fetch", "part:0"]
    expect(page.locator("#detail-waiting")).to_contain_text("waiting: signal 'approve' no timeout")
    # It suspended once and has not resumed yet: no "resumed" count.
    expect(page.locator("#detail-waiting")).not_to_contain_text("resumed")
