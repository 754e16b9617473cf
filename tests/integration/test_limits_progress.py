"""Long jobs under a cap: progress shows in `tickq show`, and a cancel asked while the job
runs is seen at its next progress call, which frees its slot under the type's cap."""

from __future__ import annotations

import json
import threading
import time

from queue_core import JobCancelled, Registry, Runner
from queue_core.model.validation import job_spec
from queue_core.policies.limits import Limits, type_limit
from queue_core.postgres import PostgresStore
from tickq.infra.cli.program import main


def test_progress_is_shown_and_a_cancel_is_seen_at_the_next_progress_call(
    conn, connect, database_url, monkeypatch, capsys
):
    monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)
    Limits(conn).set_type(type_limit("long", max_running=1))
    job_id = PostgresStore(conn).enqueue(job_spec("long")).id
    reported, release = threading.Event(), threading.Event()
    seen_cancel: list[bool] = []
    registry = Registry()

    @registry.task("long")
    def long(job):
        job.progress({"done": 1, "of": 3})
        reported.set()
        release.wait(30)
        try:
            job.progress({"done": 2, "of": 3})
        except JobCancelled:
            seen_cancel.append(True)
            raise

    runner = Runner(PostgresStore(connect()), registry, batch_size=1, concurrency=1)
    worker = threading.Thread(target=runner.tick, kwargs={"max_batches": 1})
    worker.start()
    assert reported.wait(30)

    assert main(["--json", "show", str(job_id)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["status"], shown["progress"]) == ("running", {"done": 1, "of": 3})
    assert main(["cancel", str(job_id)]) == 0
    assert "asked to stop" in capsys.readouterr().out
    release.set()
    worker.join(30)

    assert seen_cancel == [True]
    assert main(["--json", "show", str(job_id)]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "cancelled"
    # Its slot under the cap of 1 is free again.
    PostgresStore(conn).enqueue(job_spec("long"))
    assert len(PostgresStore(conn).claim(limit=5)) == 1


def test_a_running_worker_obeys_a_limit_set_after_it_started_within_five_seconds(conn, connect):
    registry = Registry()
    lock = threading.Lock()
    running, most = [0], [0]

    @registry.task("capped")
    def capped(job):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1

    store = PostgresStore(conn)
    runner = Runner(PostgresStore(connect()), registry, batch_size=4, concurrency=4)
    stop = threading.Event()
    worker = threading.Thread(target=runner.work, kwargs={"stop": stop, "poll_interval": 0.1})
    worker.start()
    try:
        # The worker claims once without limits (and caches that), then the limit arrives;
        # the jobs it must hold to one at a time turn runnable 5 s later, on the db clock.
        warm = store.enqueue(job_spec("capped")).id
        wait_until(lambda: store.get(warm).status == "succeeded")
        most[0] = 0
        Limits(conn).set_type(type_limit("capped", max_running=1))
        ids = [r.id for r in store.enqueue_many([job_spec("capped", delay=5) for _ in range(6)])]
        wait_until(lambda: all(store.get(i).status == "succeeded" for i in ids))
    finally:
        stop.set()
        worker.join(30)
        runner.close()

    assert most[0] == 1


def wait_until(condition, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.05)
