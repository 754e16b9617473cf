"""ApiFunction's durable-step routes, as a member of tickq_app (row-level security applies):
signals to one's own jobs only, steps in GET /jobs/{id}, and retry with or without steps."""

from __future__ import annotations

from uuid import uuid4

import psycopg

from queue_core import PostgresStore, Status, StepStore
from queue_core.model import validation
from queue_core.model.steps import FOREVER, WaitKind

from .conftest import Invoke

ALICE = uuid4()
BOB = uuid4()


def dead_job_with_a_step(call_api: Invoke, conn: psycopg.Connection) -> str:
    """Alice's job, claimed by a worker, one step stored, then failed for good."""
    _, job = call_api("POST", "/jobs", body={"type": "transcribe"}, sub=ALICE)
    worker = PostgresStore(conn)
    (claimed,) = worker.claim()
    assert claimed.lease_token is not None
    StepStore(worker).complete(claimed.id, claimed.lease_token, "fetch", '"audio"')
    worker.fail(claimed, "speech API down", permanent=True)
    return str(job["id"])


def test_a_signal_to_ones_own_waiting_job_is_kept_and_shown(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    _, job = call_api("POST", "/jobs", body={"type": "approval"}, sub=ALICE)

    status, sent = call_api(
        "POST", f"/jobs/{job['id']}/signals/approve", body={"ok": True}, sub=ALICE
    )

    assert status == 202 and sent == {"id": job["id"], "signal": "approve", "woke": False}
    _, shown = call_api("GET", f"/jobs/{job['id']}", sub=ALICE)
    assert [s["name"] for s in shown["signals"]] == ["approve"]
    assert shown["steps"] == [] and shown["resumes"] == 0 and shown["waiting_for"] is None
    row = conn.execute("select payload from tickq.job_signals").fetchone()
    assert row == ({"ok": True},)


def test_a_signal_wakes_only_a_job_waiting_for_a_signal_of_that_name(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    # Given two of Alice's jobs suspended by a worker, one waiting for the signal "approve",
    # one for the signal "reject"
    ids = [call_api("POST", "/jobs", body={"type": "approval"}, sub=ALICE)[1]["id"] for _ in "ab"]
    worker = PostgresStore(conn)
    for job, name in zip(worker.claim(limit=2), ("approve", "reject"), strict=True):
        assert job.lease_token is not None
        StepStore(worker).suspend(
            job.id, job.lease_token, kind=WaitKind.SIGNAL, name=name, until=FOREVER
        )
    waits = dict(conn.execute("select id::text, wait_name from tickq.jobs").fetchall())

    # When Alice sends "approve" to both
    sent = {i: call_api("POST", f"/jobs/{i}/signals/approve", sub=ALICE) for i in ids}

    # Then only the job waiting for it woke, and each answer said whether it woke one
    assert sent == {
        i: (202, {"id": i, "signal": "approve", "woke": waits[i] == "approve"}) for i in ids
    }
    due = dict(conn.execute("select id::text, run_after <= now() from tickq.jobs").fetchall())
    assert due == {i: waits[i] == "approve" for i in ids}


def test_another_users_job_cannot_be_signalled(call_api: Invoke, conn: psycopg.Connection) -> None:
    _, job = call_api("POST", "/jobs", body={"type": "approval"}, sub=ALICE)

    status, _ = call_api("POST", f"/jobs/{job['id']}/signals/approve", sub=BOB)

    assert status == 404
    assert conn.execute("select count(*) from tickq.job_signals").fetchone() == (0,)


def test_signals_to_finished_jobs_and_repeated_names_are_refused(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    dead = dead_job_with_a_step(call_api, conn)
    status, body = call_api("POST", f"/jobs/{dead}/signals/approve", sub=ALICE)
    assert status == 409 and "dead" in body["message"]

    _, live = call_api("POST", "/jobs", body={"type": "approval"}, sub=ALICE)
    assert call_api("POST", f"/jobs/{live['id']}/signals/go", sub=ALICE)[0] == 202
    status, body = call_api("POST", f"/jobs/{live['id']}/signals/go", sub=ALICE)
    assert status == 422 and "already sent" in body["message"]


def test_get_lists_the_steps_and_retry_keeps_them_unless_fresh(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    job_id = dead_job_with_a_step(call_api, conn)
    _, shown = call_api("GET", f"/jobs/{job_id}", sub=ALICE)
    assert [(s["name"], s["size"]) for s in shown["steps"]] == [("fetch", 7)]

    status, retried = call_api("POST", f"/jobs/{job_id}/retry", sub=ALICE)
    assert status == 200 and retried["status"] == "queued"
    assert [s["name"] for s in call_api("GET", f"/jobs/{job_id}", sub=ALICE)[1]["steps"]] == [
        "fetch"
    ]

    store = PostgresStore(conn)
    store.cancel(job_id)
    status, retried = call_api("POST", f"/jobs/{job_id}/retry", body={"fresh": True}, sub=ALICE)
    assert status == 200 and retried["status"] == "queued"
    assert call_api("GET", f"/jobs/{job_id}", sub=ALICE)[1]["steps"] == []


def test_a_malformed_retry_body_is_refused_and_changes_nothing(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    job_id = dead_job_with_a_step(call_api, conn)
    for body in ({"fresh": "yes"}, {"fresh": True, "other": 1}, [1]):
        status, _ = call_api("POST", f"/jobs/{job_id}/retry", body=body, sub=ALICE)
        assert status == 400
    _, shown = call_api("GET", f"/jobs/{job_id}", sub=ALICE)
    assert shown["status"] == "dead" and len(shown["steps"]) == 1


def test_the_job_view_says_how_the_handler_ran_it(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    from queue_core import Registry, Runner

    registry = Registry()
    registry.task("embed", batch_size=5)(lambda batch: None)
    registry.task("charge", transactional=True)(lambda job, tx: None)
    _, batched = call_api("POST", "/jobs", body={"type": "embed"}, sub=ALICE)
    _, charged = call_api("POST", "/jobs", body={"type": "charge"}, sub=ALICE)
    with Runner(PostgresStore(conn), registry) as runner:
        runner.tick()

    _, batch_view = call_api("GET", f"/jobs/{batched['id']}", sub=ALICE)
    _, charge_view = call_api("GET", f"/jobs/{charged['id']}", sub=ALICE)

    assert batch_view["status"] == "succeeded" and batch_view["batch_id"] is not None
    assert batch_view["completed_in_transaction"] is False
    assert (charge_view["batch_id"], charge_view["completed_in_transaction"]) == (None, True)


def test_retry_from_a_step_forgets_it_and_the_later_steps_and_keeps_the_earlier(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    _, job = call_api("POST", "/jobs", body={"type": "transcribe"}, sub=ALICE)
    worker = PostgresStore(conn)
    (claimed,) = worker.claim()
    assert claimed.lease_token is not None
    for name in ("fetch", "split", "transcribe"):
        StepStore(worker).complete(claimed.id, claimed.lease_token, name, '"done"')
    worker.fail(claimed, "speech API down", permanent=True)
    path = f"/jobs/{job['id']}/retry"

    status, body = call_api("POST", path, body={"from_step": "nope"}, sub=ALICE)
    assert status == 422 and "no step 'nope'" in body["message"]
    status, _ = call_api("POST", path, body={"from_step": "split", "fresh": True}, sub=ALICE)
    assert status == 400
    assert call_api("GET", f"/jobs/{job['id']}", sub=ALICE)[1]["status"] == "dead"
    status, _ = call_api("POST", path, body={"from_step": "split"}, sub=BOB)
    assert status == 404

    status, retried = call_api("POST", path, body={"from_step": "split"}, sub=ALICE)

    assert status == 200 and retried["status"] == "queued"
    shown = call_api("GET", f"/jobs/{job['id']}", sub=ALICE)[1]
    assert [s["name"] for s in shown["steps"]] == ["fetch"]


def test_cancelling_a_parent_through_the_api_cancels_its_workflow_children(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    _, job = call_api("POST", "/jobs", body={"type": "transcribe"}, sub=ALICE)
    worker = PostgresStore(conn)
    (claimed,) = worker.claim()
    assert claimed.lease_token is not None
    specs = [validation.job_spec("embed", {"i": i}) for i in range(3)]
    StepStore(worker).enqueue_children(
        claimed.id, claimed.lease_token, step="parts", specs=specs, max_running=1
    )
    shown = call_api("GET", f"/jobs/{job['id']}", sub=ALICE)[1]
    assert len(shown["spawned"]) == 3 and shown["waiting_for"]["kind"] == "children"

    status, cancelled = call_api("POST", f"/jobs/{job['id']}/cancel", sub=ALICE)

    assert status == 200 and cancelled["status"] == "cancelled"
    rows = conn.execute(
        "select status, error from tickq.jobs where type = 'embed' order by status, error"
    ).fetchall()
    parent = f"parent {job['id']} is cancelled"
    assert rows == [("cancelled", parent), ("cancelled", parent), ("cancelled", None)]


def test_the_api_refuses_to_cancel_one_child_of_a_waiting_parent_and_changes_nothing(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    call_api("POST", "/jobs", body={"type": "transcribe"}, sub=ALICE)
    worker = PostgresStore(conn)
    (claimed,) = worker.claim()
    assert claimed.lease_token is not None
    specs = [validation.job_spec("embed", {"i": i}) for i in range(2)]
    StepStore(worker).enqueue_children(
        claimed.id, claimed.lease_token, step="parts", specs=specs, max_running=1
    )
    (child,) = [r for r in worker.relatives(claimed.id) if r.status.value == "queued"]

    status, body = call_api("POST", f"/jobs/{child.id}/cancel", sub=ALICE)

    assert status == 403 and "permission denied" in body["message"]
    assert worker.get(child.id).status.value == "queued"
    worker.cancel(child.id)  # a worker login may: the parent counts down, the next is released
    statuses = sorted(r.status.value for r in worker.relatives(claimed.id))
    assert statuses == ["cancelled", "queued"]


def test_cancelling_ones_own_saga_that_waits_answers_compensating_and_records_it(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    _, job = call_api("POST", "/jobs", body={"type": "checkout"}, sub=ALICE)
    worker = PostgresStore(conn)
    (claimed,) = worker.claim()
    assert claimed.lease_token is not None
    steps = StepStore(worker)
    steps.complete(claimed.id, claimed.lease_token, "charge", '"ch_1"', compensable=True)
    steps.suspend(claimed.id, claimed.lease_token, kind=WaitKind.SIGNAL, name="approved")

    status, answer = call_api("POST", f"/jobs/{job['id']}/cancel", sub=ALICE)
    status_again, again = call_api("POST", f"/jobs/{job['id']}/cancel", sub=ALICE)

    assert (status, answer["status"], answer["compensating"]) == (200, "queued", True)
    assert (status_again, again["compensating"]) == (200, True)
    assert steps.show(claimed.id).to_dict()["compensation"]["ends"] == "cancelled"
    assert call_api("POST", f"/jobs/{job['id']}/cancel", sub=BOB)[0] == 404


def test_the_job_view_shows_the_code_version_of_its_last_run_and_of_each_step(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    # Given Alice's job whose run under code version v7 loaded its history and stored a step
    _, job = call_api("POST", "/jobs", body={"type": "transcribe"}, sub=ALICE)
    worker = PostgresStore(conn)
    (claimed,) = worker.claim()
    assert claimed.lease_token is not None
    steps = StepStore(worker)
    steps.load(claimed.id, claimed.lease_token, code_version="v7")
    steps.complete(claimed.id, claimed.lease_token, "fetch", '"audio"', code_version="v7")

    # Then GET /jobs/{id} shows the version on the job and on its step
    _, shown = call_api("GET", f"/jobs/{job['id']}", sub=ALICE)
    assert shown["code_version"] == "v7"
    assert [(s["name"], s["code_version"]) for s in shown["steps"]] == [("fetch", "v7")]


def test_the_job_view_shows_the_declared_max_attempts_and_the_compensations_runs_apart(
    call_api: Invoke, conn: psycopg.Connection
) -> None:
    """A saga declared with max_attempts 1 that began compensating on its attempt, whose
    worker died during the undos, ran once more to finish them: 1/1 and one compensation
    run, not 2 of the 7 attempts its compensation left it."""
    _, job = call_api("POST", "/jobs", body={"type": "checkout", "max_attempts": 1}, sub=ALICE)
    worker = PostgresStore(conn)
    steps = StepStore(worker)
    (claimed,) = worker.claim()
    assert claimed.lease_token is not None
    steps.complete(claimed.id, claimed.lease_token, "charge", '"ch_1"', compensable=True)
    steps.compensation_begin(
        claimed.id, claimed.lease_token, ends=Status.DEAD, error="out of stock", spare=6
    )
    conn.execute(
        "update tickq.jobs set lease_until = now() - interval '1 second' where id = %s",
        (claimed.id,),
    )
    worker.reclaim()
    conn.execute("update tickq.jobs set run_after = now() where id = %s", (claimed.id,))
    (again,) = worker.claim()
    worker.fail(again, "out of stock", permanent=True)

    _, viewed = call_api("GET", f"/jobs/{job['id']}", sub=ALICE)
    _, listed = call_api("GET", "/jobs", sub=ALICE)

    counts = {"attempts": 1, "max_attempts": 1, "compensation_runs": 1}
    assert worker.get(claimed.id).max_attempts == 7  # what the engine counts against
    assert viewed["status"] == "dead"
    assert {k: viewed[k] for k in counts} == counts
    (row,) = [j for j in listed["jobs"] if j["id"] == job["id"]]
    assert {k: row[k] for k in counts} == counts
    # The owner's retry (through the guard on its writes): attempts and the compensation's
    # count of them start over, against the max_attempts declared, which the engine counts
    # against again.
    status, retried = call_api("POST", f"/jobs/{job['id']}/retry", sub=ALICE)
    assert status == 200
    assert (retried["attempts"], retried["max_attempts"], retried["compensation_runs"]) == (0, 1, 0)
    again = worker.get(claimed.id)
    assert (again.max_attempts, again.declared_max_attempts) == (1, None)
