"""Sagas that end away from their handler, against a real database, run in-process by a
Runner: cancelled while suspended (a sleep, a signal wait, its children) or queued to retry,
by the API's store, the CLI's and the operator's cancel, and reclaimed on their last
attempt. Each compensates: the undos of its completed steps run in reverse order, once each
(a crash in the middle included), and only then does it end as it was to end."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import psycopg
import pytest

from queue_core import (
    JobContext,
    PermanentError,
    PostgresStore,
    Registry,
    Runner,
    Status,
    StepStore,
    TickReport,
)
from queue_core.console.jobs import BulkAction, JobFilter, OperatorConsole
from queue_core.migrate import available
from queue_core.model.transitions import compensating
from tickq.infra.cli.program import main

INSTANT = {"base": 0.001, "max": 0.001}
ALICE = UUID("0190c0de-0000-7000-8000-00000000a11c")


class Crash(SystemExit):
    """Stands for the worker dying: the runner lets it through (from a handler as from an
    undo), leaving the lease behind to expire."""


@pytest.fixture
def store(conn: psycopg.Connection) -> PostgresStore:
    return PostgresStore(conn)


@pytest.fixture
def registry() -> Registry:
    return Registry()


def saga(registry: Registry, undone: list[str], then: Any, **options: Any) -> None:
    """A three-step saga (two with an undo) that then does `then(job)`: suspends, fails."""

    @registry.task("saga", backoff=INSTANT, **options)
    def run(job: JobContext) -> None:
        job.step("charge", lambda: "ch_1", undo=lambda c: undone.append(f"refund {c}"))
        job.step("note", lambda: 0)
        job.step("reserve", lambda: "r_1", undo=lambda r: undone.append(f"release {r}"))
        then(job)


def tick(store: PostgresStore, registry: Registry, job_id: UUID, *, until: Any, most: int = 40):
    """Tick until `until(job)` holds; a Crash leaves the lease to expire and be reclaimed."""
    with Runner(store, registry, rand=lambda: 0.0) as runner:
        for _ in range(most):
            try:
                runner.run_batch(TickReport())
            except Crash:
                expire_lease(store, job_id)
            store.reclaim()
            job = store.get(job_id)
            if until(job):
                return job
    raise AssertionError(f"job {job_id}: {store.get(job_id)}")


def expire_lease(store: PostgresStore, job_id: UUID) -> None:
    store._db.conn.execute(
        "update tickq.jobs set lease_until = now() - interval '1 second'"
        " where id = %s and status = 'running'",
        (job_id,),
    )


def ended(job: Any) -> bool:
    return bool(job.is_terminal)


def compensation_rows(conn: psycopg.Connection, job_id: UUID) -> list[tuple[str, str]]:
    return conn.execute(
        "select name, error from tickq.job_step_tries where job_id = %s and kind = 'compensation'",
        (job_id,),
    ).fetchall()


def undone_names(store: PostgresStore, job_id: UUID) -> list[str]:
    return [u["name"] for u in StepStore(store).show(job_id).to_dict()["undone"]]


@pytest.mark.parametrize("wait", ["sleep", "signal", "retrying"])
def test_a_saga_cancelled_while_it_does_not_run_runs_its_undos_then_ends_cancelled(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection, wait: str
) -> None:
    undone: list[str] = []

    def then(job: JobContext) -> None:
        if wait == "sleep":
            job.sleep("nap", 3600)
        elif wait == "signal":
            job.wait_for("approved")
        else:
            raise ConnectionError("the warehouse is down")

    saga(registry, undone, then, max_attempts=3)
    job_id = store.enqueue(registry.spec("saga")).id
    expected = Status.RETRYING if wait == "retrying" else Status.QUEUED
    tick(store, registry, job_id, until=lambda j: j.status == expected)
    conn.execute(
        "update tickq.jobs set run_after = now() + interval '1 hour' where id = %s", (job_id,)
    )

    answer = store.cancel(job_id)
    again = store.cancel(job_id)  # asked twice: compensated once

    assert compensating(answer) and compensating(again)
    assert answer.status == expected and answer.run_after <= store.now()
    assert compensation_rows(conn, job_id) == [("cancelled", "cancelled")]
    job = tick(store, registry, job_id, until=ended)
    assert (job.status, job.error) == (Status.CANCELLED, "cancelled")
    assert undone == ["release r_1", "refund ch_1"]
    assert undone_names(store, job_id) == ["reserve", "charge"]
    # The run that compensated is counted as such, against the max_attempts declared. (A
    # suspended attempt was given back: the retrying one counted its failed attempt.)
    assert (job.compensation_runs, job.to_dict()["max_attempts"]) == (1, 3)
    assert job.to_dict()["attempts"] == (1 if wait == "retrying" else 0)


def test_a_saga_waiting_on_its_children_cancelled_by_the_operator_cancels_them_and_compensates(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    undone: list[str] = []
    saga(registry, undone, lambda job: job.map("ship", "parcel", [{"n": n} for n in range(3)]))

    @registry.task("parcel")
    def parcel(job: JobContext) -> int:
        return 1

    job_id = store.enqueue(registry.spec("saga")).id
    with Runner(store, registry) as runner:
        runner.run_batch(TickReport())
    assert store.get(job_id).status == Status.QUEUED  # suspended until its children end

    (result,) = OperatorConsole(conn).act(BulkAction.CANCEL, [job_id])

    assert (result.outcome, result.status) == ("compensating", "queued")
    children = conn.execute(
        "select distinct status from tickq.jobs where type = 'parcel'"
    ).fetchall()
    assert children == [("cancelled",)]
    job = tick(store, registry, job_id, until=ended)
    assert job.status == Status.CANCELLED
    assert undone == ["release r_1", "refund ch_1"]
    (again,) = OperatorConsole(conn).act(BulkAction.CANCEL, [job_id])
    assert again.outcome == "not cancellable"


def test_an_applications_cancel_of_its_own_saga_compensates_it(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection, app_login_url: str
) -> None:
    undone: list[str] = []
    saga(registry, undone, lambda job: job.sleep("nap", 3600))
    job_id = store.enqueue(registry.spec("saga", user_id=ALICE)).id
    tick(store, registry, job_id, until=lambda j: j.status == Status.QUEUED)

    with psycopg.connect(app_login_url, autocommit=True) as app:
        answer = PostgresStore(app, user_id=ALICE).cancel(job_id)

    assert compensating(answer)
    job = tick(store, registry, job_id, until=ended)
    assert (job.status, undone) == (Status.CANCELLED, ["release r_1", "refund ch_1"])


def test_the_cli_cancel_of_a_suspended_saga_says_it_compensates(
    store: PostgresStore,
    registry: Registry,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    database_url: str,
) -> None:
    from tickq.infra.cli.program import main

    undone: list[str] = []
    saga(registry, undone, lambda job: job.sleep("nap", 3600))
    job_id = store.enqueue(registry.spec("saga")).id
    tick(store, registry, job_id, until=lambda j: j.status == Status.QUEUED)
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    capsys.readouterr()

    assert main(["cancel", str(job_id)]) == 0

    assert "compensating" in capsys.readouterr().out
    job = tick(store, registry, job_id, until=ended)
    assert (job.status, undone) == (Status.CANCELLED, ["release r_1", "refund ch_1"])


@pytest.mark.parametrize("crash_in_undo", [False, True])
def test_a_saga_whose_worker_dies_on_its_last_attempt_compensates_then_ends_dead(
    store: PostgresStore,
    registry: Registry,
    conn: psycopg.Connection,
    crash_in_undo: bool,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    undone: list[str] = []
    crashes: list[str] = []
    seen: list[tuple[int, int, int]] = []

    @registry.task("saga", max_attempts=2, backoff=INSTANT)
    def run(job: JobContext) -> None:
        seen.append((job.attempt, job.max_attempts, job.compensation_runs))

        def release(r: str) -> None:
            if crash_in_undo and "undo" not in crashes:
                crashes.append("undo")
                raise Crash()
            undone.append(f"release {r}")

        job.step("charge", lambda: "ch_1", undo=lambda c: undone.append(f"refund {c}"))
        job.step("reserve", lambda: "r_1", undo=release)
        crashes.append("handler")
        raise Crash()  # the worker dies, on every attempt

    job_id = store.enqueue(registry.spec("saga")).id
    job = tick(store, registry, job_id, until=ended)

    assert (job.status, job.error) == (Status.DEAD, "lease expired")
    assert undone == ["release r_1", "refund ch_1"]
    assert crashes.count("handler") == 2  # both attempts died; the compensation ran no step
    assert compensation_rows(conn, job_id) == [("dead", "lease expired")]
    tries = {u["name"]: u["tries"] for u in StepStore(store).show(job_id).to_dict()["undone"]}
    assert tries == {"reserve": 2 if crash_in_undo else 1, "charge": 1}
    # Counts that mean what they say: both declared attempts, the compensation's runs apart
    # (one more when a worker died in an undo), though the engine raised max_attempts.
    runs = 2 if crash_in_undo else 1
    assert job.max_attempts > 2
    counts = {"attempts": 2, "max_attempts": 2, "compensation_runs": runs}
    assert {k: job.to_dict()[k] for k in counts} == counts
    assert job.attempts_label == f"2/2, compensation runs {runs}"
    # Its Job Dead event carries the same counts.
    ((detail,),) = conn.execute(
        "select detail from tickq.outbox where job_id = %s and detail_type = 'Job Dead'",
        (job_id,),
    ).fetchall()
    assert {k: detail[k] for k in counts} == counts
    # Its handler saw the max_attempts declared, the compensation's runs apart, on every run.
    assert seen == [(1, 2, 0), (2, 2, 0), *((2 + n, 2, n) for n in range(1, runs + 1))]
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    capsys.readouterr()
    assert main(["show", str(job_id), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {k: shown[k] for k in counts} == counts
    viewed = OperatorConsole(conn).job(job_id)
    assert {k: viewed[k] for k in counts} == counts
    (listed,) = OperatorConsole(conn).jobs(JobFilter(types=("saga",))).jobs
    assert {k: listed[k] for k in counts} == counts
    # Retried, its attempts start over, and so does the compensation's count of them; the
    # engine counts them against the max_attempts declared again, not the raised one.
    retried = store.retry(job_id)
    assert (retried.attempts, retried.compensation_runs, retried.shown_max_attempts) == (0, 0, 2)
    assert (retried.max_attempts, retried.declared_max_attempts) == (2, None)
    assert store.get(job_id).max_attempts == 2


def test_migration_0046_gives_jobs_retried_before_their_declared_max_attempts_back(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    """Sagas retried before the retry restored the declared max_attempts: those still to
    run, within their declared attempts, count against it again; the others keep theirs."""
    saga(registry, [], lambda job: None, max_attempts=2)
    ids = [store.enqueue(registry.spec("saga")).id for _ in range(4)]
    # As the old retry left them: the raised max kept, the declared one beside it.
    conn.execute(
        "update tickq.jobs set max_attempts = 12, declared_max_attempts = 2,"
        " attempts = (array[1, 3, 0, 0])[array_position(%s::uuid[], id)],"
        " status = (array['queued', 'queued', 'dead', 'queued'])[array_position(%s::uuid[], id)],"
        " finished_at = case when id = %s then now() end,"
        " compensation_attempts = case when id = %s then 0 end",
        (ids, ids, ids[2], ids[3]),
    )
    (migration,) = [m for m in available() if m.version.startswith("0046_")]

    conn.execute(migration.sql)

    counts = [
        (j.max_attempts, j.declared_max_attempts, j.compensation_attempts)
        for j in map(store.get, ids)
    ]
    assert counts == [(2, None, None), (12, 2, None), (12, 2, None), (12, 2, 0)]


def test_a_job_without_an_undo_ends_as_before_on_cancel_and_reclaim(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    @registry.task("plain", max_attempts=1, backoff=INSTANT)
    def plain(job: JobContext) -> None:
        job.step("a", lambda: 1)
        if job.payload.get("crash"):
            raise Crash()
        job.sleep("nap", 3600)

    sleeper = store.enqueue(registry.spec("plain")).id
    tick(store, registry, sleeper, until=lambda j: j.status == Status.QUEUED)
    assert store.cancel(sleeper).status == Status.CANCELLED
    crasher = store.enqueue(registry.spec("plain", {"crash": True})).id
    job = tick(store, registry, crasher, until=ended)
    assert (job.status, job.error) == (Status.DEAD, "lease expired")
    assert compensation_rows(conn, sleeper) == compensation_rows(conn, crasher) == []


def test_a_saga_compensating_already_is_not_compensated_again_by_a_cancel(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    tries: list[int] = []

    def refund(_: Any) -> None:
        tries.append(1)
        if len(tries) == 1:
            raise ConnectionError("the bank is down")  # tried again after its backoff

    @registry.task("saga", max_attempts=1, backoff=INSTANT)
    def run(job: JobContext) -> None:
        job.step("charge", lambda: "ch_1", undo=refund)
        raise PermanentError("out of stock")

    job_id = store.enqueue(registry.spec("saga")).id
    tick(store, registry, job_id, until=lambda j: j.status == Status.QUEUED)
    conn.execute(
        "update tickq.jobs set run_after = now() + interval '1 hour' where id = %s", (job_id,)
    )
    before = store.get(job_id)

    answer = store.cancel(job_id)

    assert compensating(answer) and answer.max_attempts == before.max_attempts
    assert compensation_rows(conn, job_id) == [("dead", "PermanentError: out of stock")]
    conn.execute("update tickq.jobs set run_after = now() where id = %s", (job_id,))
    job = tick(store, registry, job_id, until=ended)
    assert (job.status, job.error, len(tries)) == (
        Status.DEAD,
        "PermanentError: out of stock",
        2,
    )


def test_the_saga_children_of_a_cancelled_parent_compensate_before_they_end_cancelled(
    store: PostgresStore, registry: Registry, conn: psycopg.Connection
) -> None:
    undone: list[str] = []

    @registry.task("parent")
    def parent(job: JobContext) -> Any:
        return job.map("legs", "leg", [{"n": n} for n in range(2)])

    @registry.task("leg", backoff=INSTANT)
    def leg(job: JobContext) -> None:
        n = job.payload["n"]
        job.step("book", lambda: n, undo=lambda b: undone.append(f"unbook {b}"))
        job.sleep("until confirmed", 3600)

    job_id = store.enqueue(registry.spec("parent")).id
    with Runner(store, registry) as runner:
        for _ in range(3):
            runner.run_batch(TickReport())
    legs = conn.execute(
        "select id, status from tickq.jobs where type = 'leg' order by id"
    ).fetchall()
    assert [s for _, s in legs] == ["queued", "queued"]  # each asleep after its booking

    assert store.cancel(job_id).status == Status.CANCELLED

    for leg_id, _ in legs:
        assert compensation_rows(conn, leg_id) == [("cancelled", f"parent {job_id} is cancelled")]
        job = tick(store, registry, leg_id, until=ended)
        assert (job.status, job.error) == (Status.CANCELLED, f"parent {job_id} is cancelled")
        assert (job.compensation_runs, job.shown_max_attempts) == (1, 3)
    assert sorted(undone) == ["unbook 0", "unbook 1"]
