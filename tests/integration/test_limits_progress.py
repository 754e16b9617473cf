"""Long jobs under a cap: progress shows in `tickq show`, and a cancel asked while the job
runs is seen at its next progress call, which frees its slot under the type's cap."""

from __future__ import annotations

import json
import threading

from infra.cli import main
from queue_core import JobCancelled, Registry, Runner
from queue_core.limits import Limits, type_limit
from queue_core.store import PostgresStore
from queue_core.validation import job_spec


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
