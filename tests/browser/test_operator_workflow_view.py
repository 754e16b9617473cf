"""The operator's detail of another user's workflow jobs in a real browser, the jobs made by a
real Runner: a parent's map step and the children it spawned (links that open them), how
far a waiting parent's children are, a compensated saga's undos and its error, a retried
step's tries, and how a batch or a transactional handler ran a job; never a payload, a
result or a step's result, on the page or in the detail's JSON."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import psycopg
from playwright.sync_api import Page, expect

from queue_core import (
    JobContext,
    PermanentError,
    PostgresStore,
    Registry,
    Retry,
    Runner,
    TickReport,
)
from tests.operator_scenes import SECRETS, leaked

from .conftest import ConsoleLog, Serve
from .test_operator_job_view import ALICE, OPERATOR, open_detail, open_every_users_list

QUICK = {"base": 0.001, "max": 0.001}
STEP_NAMES = "rows => rows.map(r => r.dataset.step)"
STEP_TRIES = "rows => rows.map(r => [r.dataset.step, r.cells[3].textContent])"


def run(store: PostgresStore, registry: Registry, job_id: UUID, *, most: int = 30) -> None:
    """Tick until the job has ended, bringing its millisecond wake times (a step's retry, an
    undo's backoff) to now; a children wait is woken by its children, not by this."""
    with Runner(store, registry, rand=lambda: 0.0) as runner:
        for _ in range(most):
            runner.tick()
            if store.get(job_id).is_terminal:
                return
            store._db.conn.execute(
                "update tickq.jobs set run_after = now() where status in ('queued', 'retrying')"
                " and run_after > now() and run_after < now() + interval '1 minute'"
            )
    raise AssertionError(f"job {job_id} did not end: {store.get(job_id)}")


def alices(store: PostgresStore, registry: Registry, type_: str, **options: Any) -> UUID:
    """A job of Alice's with a secret payload."""
    spec = registry.spec(type_, {"doc": SECRETS["payload"]}, user_id=ALICE.owner_id(), **options)
    return store.enqueue(spec).id


def operator_opens(page: Page, serve_as: Serve, job_id: UUID) -> str:
    """The operator's list of every user's jobs, then the job's detail; the detail's JSON as
    the browser got it, to check what reached it besides what the page shows."""
    open_every_users_list(page, serve_as(OPERATOR).url)
    return detail_answer(page, lambda: open_detail(page, job_id))


def detail_answer(page: Page, action: Callable[[], None]) -> str:
    with page.expect_response(lambda r: "/admin/jobs/" in r.url) as answer:
        action()
    return answer.value.text()


def test_the_operator_sees_a_map_step_and_opens_its_children_without_their_data(
    page: Page, conn: psycopg.Connection, serve_as: Serve, console_log: ConsoleLog
) -> None:
    # Given Alice's parent that mapped three children, every one's payload and result secret
    store, registry = PostgresStore(conn), Registry()

    @registry.task("fan")
    def fan(job: JobContext) -> list[Any]:
        items = [{"n": n, "doc": SECRETS["payload"]} for n in range(3)]
        return job.map("chunks", "chunk", items)

    @registry.task("chunk")
    def chunk(job: JobContext) -> dict[str, Any]:
        return {"n": job.payload["n"], "text": SECRETS["result"]}

    parent = alices(store, registry, "fan")
    run(store, registry, parent)
    spawned = sorted(r.id for r in store.relatives(parent) if r.relation == "spawned")
    assert len(spawned) == 3

    # When the operator opens the parent from every user's list
    answer = operator_opens(page, serve_as, parent)

    # Then its map step is listed and its three children are in the graph, each succeeded
    assert page.locator("#detail-steps tbody tr").evaluate_all(STEP_NAMES) == ["chunks"]
    expect(page.locator("#detail-waiting")).to_contain_text("map chunks: 3 of 3 children ended")
    children = page.locator('#detail-children li[data-status="succeeded"] a.graph-link')
    expect(children).to_have_count(3)
    assert sorted(children.evaluate_all("as => as.map(a => a.dataset.jobId)")) == [
        str(c) for c in spawned
    ]
    expect(page.locator("#detail-result")).to_have_text("(not shown to operators)")
    assert leaked(page.content()) == []

    # When they follow a child's link
    child = detail_answer(
        page, lambda: page.click(f'#detail-children a[data-job-id="{spawned[0]}"]')
    )

    # Then the child's detail names the parent awaiting it, and none of its data
    expect(page.locator("#detail-title")).to_contain_text(str(spawned[0]))
    expect(page.locator(f'#detail-parents a[data-job-id="{parent}"]')).to_have_count(1)
    expect(page.locator("#detail-payload")).to_have_text("(not shown to operators)")
    assert leaked(page.content()) == leaked(answer) == leaked(child) == []
    assert console_log.problems() == []


def test_the_operator_sees_how_far_a_waiting_parents_children_are(
    page: Page, conn: psycopg.Connection, serve_as: Serve, console_log: ConsoleLog
) -> None:
    # Given Alice's parent waiting for the three children it mapped, one of them ended
    store, registry = PostgresStore(conn), Registry()
    registry.task("fan")(lambda job: job.map("chunks", "chunk", [{"n": n} for n in range(3)]))
    registry.task("chunk")(lambda job: None)
    parent = alices(store, registry, "fan")
    with Runner(store, registry) as runner:
        runner.run_batch(TickReport())
    (first,) = store.claim(limit=1)
    assert first.type == "chunk"
    store.complete(first, {"text": SECRETS["result"]})

    # When the operator opens the parent
    answer = operator_opens(page, serve_as, parent)

    # Then it waits for the map step's children, one of three ended, its step not yet stored
    waiting = page.locator("#detail-waiting")
    expect(waiting).to_contain_text("waiting: children of step 'chunks'")
    expect(waiting).to_contain_text("map chunks: 1 of 3 children ended")
    expect(page.locator("#detail-children li")).to_have_count(3)
    expect(page.locator('#detail-children li[data-status="succeeded"]')).to_have_count(1)
    assert leaked(page.content()) == leaked(answer) == []
    assert console_log.problems() == []


def test_the_operator_sees_what_a_compensated_saga_undid_and_its_error(
    page: Page, conn: psycopg.Connection, serve_as: Serve, console_log: ConsoleLog
) -> None:
    # Given Alice's saga: charge and reserve done (their results secret), ship fails for good
    store, registry = PostgresStore(conn), Registry()
    undone: list[str] = []

    @registry.task("order", max_attempts=1, backoff=QUICK)
    def order(job: JobContext) -> None:
        secret = SECRETS["step result"]
        job.step("charge", lambda: secret, undo=lambda _: undone.append("charge"))
        job.step("reserve", lambda: secret, undo=lambda _: undone.append("reserve"))
        job.step("ship", lambda: (_ for _ in ()).throw(PermanentError("out of stock")))

    saga = alices(store, registry, "order")
    run(store, registry, saga)
    assert undone == ["reserve", "charge"]

    # When the operator opens it
    answer = operator_opens(page, serve_as, saga)

    # Then it is dead with its error, and the detail says what was undone, the later first
    expect(page.locator('#detail-fields dd[data-field="status"]')).to_have_text("dead")
    error = page.locator('#detail-fields dd[data-field="error"]')
    expect(error).to_have_text("PermanentError: out of stock")
    expect(page.locator("#detail-waiting")).to_contain_text("undone: reserve, charge")
    assert page.locator("#detail-steps tbody tr").evaluate_all(STEP_NAMES) == [
        "charge",
        "reserve",
    ]
    # Its attempts against the max_attempts declared (the compensation raised it to 12), the
    # undos done in the run that failed: no compensation run
    expect(page.locator('#detail-fields dd[data-field="attempts"]')).to_have_text("1")
    expect(page.locator('#detail-fields dd[data-field="max_attempts"]')).to_have_text("1")
    expect(page.locator('#detail-fields dd[data-field="compensation_runs"]')).to_have_text("0")
    assert leaked(page.content()) == leaked(answer) == []
    assert console_log.problems() == []


def test_the_operator_sees_the_tries_of_a_step_that_failed_once(
    page: Page, conn: psycopg.Connection, serve_as: Serve, console_log: ConsoleLog
) -> None:
    # Given Alice's job whose "call" step timed out once and then succeeded
    store, registry = PostgresStore(conn), Registry()
    calls: list[int] = []

    @registry.task("sync")
    def sync(job: JobContext) -> str:
        def call() -> str:
            calls.append(1)
            if len(calls) == 1:
                raise TimeoutError("slow API")
            return SECRETS["step result"]

        job.step("fetch", lambda: SECRETS["step result"])
        return job.step("call", call, retry=Retry(3, base=0.001, max=0.001))

    job = alices(store, registry, "sync")
    run(store, registry, job)
    assert len(calls) == 2

    # When the operator opens it
    answer = operator_opens(page, serve_as, job)

    # Then the retried step shows its two tries, the other one
    rows = page.locator("#detail-steps tbody tr")
    expect(rows).to_have_count(2)
    assert rows.evaluate_all(STEP_TRIES) == [["fetch", "1"], ["call", "2"]]
    assert leaked(page.content()) == leaked(answer) == []
    assert console_log.problems() == []


def test_the_operator_sees_how_a_batch_and_a_transactional_handler_ran_a_job(
    page: Page, conn: psycopg.Connection, serve_as: Serve, console_log: ConsoleLog
) -> None:
    # Given Alice's job run by a batch handler and one run by a transactional handler
    store, registry = PostgresStore(conn), Registry()
    registry.task("embed", batch_size=3)(lambda batch: None)
    registry.task("charge", transactional=True)(lambda job, tx: None)
    batched = alices(store, registry, "embed")
    charged = alices(store, registry, "charge")
    with Runner(store, registry) as runner:
        runner.tick()
    batch_id = conn.execute("select batch_id from tickq.jobs where id = %s", (batched,)).fetchone()
    assert batch_id is not None and batch_id[0] is not None

    # When the operator opens the batch handler's job
    answer = operator_opens(page, serve_as, batched)

    # Then the detail names its batch, and nothing of a transaction
    handling = page.locator("#detail-handling")
    expect(handling).to_have_text(f"part of batch {batch_id[0]}")

    # When they open the transactional one from the list
    page.keyboard.press("Escape")
    charge = detail_answer(page, lambda: open_detail(page, charged))

    # Then it says it completed in the handler's transaction, and no batch
    expect(handling).to_have_text("completed in the handler's transaction")
    assert leaked(page.content()) == leaked(answer) == leaked(charge) == []
    assert console_log.problems() == []
