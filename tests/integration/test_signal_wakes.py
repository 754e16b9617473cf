"""A signal wakes only a job that waits for a signal of that name, and says whether it woke
one, whichever way it is sent: the store (a worker's login), `tickq signal`, the store of an
application login (through tickq.signal) and tickq.signal called in SQL. The HTTP API's
send is held in tests/functions/test_api_steps.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from uuid import UUID, uuid4

import psycopg
import pytest

from queue_core import PostgresStore, StepStore
from queue_core.model import validation
from queue_core.model.steps import FOREVER, WaitKind
from tickq.infra.cli.program import main

ALICE = uuid4()
WAYS = ("store", "cli", "app store", "app sql")

Send = Callable[[UUID, str], bool]


def suspended(conn: psycopg.Connection, kind: WaitKind, name: str) -> UUID:
    """An application user's job, claimed and suspended until FOREVER waiting on `name`."""
    store = PostgresStore(conn)
    job_id = store.enqueue(validation.job_spec("approval", {}, user_id=ALICE)).id
    (claimed,) = [job for job in store.claim(limit=10) if job.id == job_id]
    assert claimed.lease_token is not None
    StepStore(store).suspend(job_id, claimed.lease_token, kind=kind, name=name, until=FOREVER)
    return job_id


@pytest.fixture
def send(
    way: str,
    conn: psycopg.Connection,
    app_login_url: str,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> Send:
    """Send a signal (no payload) the way the test names; returns whether it woke the job."""
    if way == "store":
        return lambda job_id, name: StepStore(PostgresStore(conn)).signal(job_id, name)
    if way == "cli":
        monkeypatch.setenv("TICKQ_DATABASE_URL", database_url)

        def by_cli(job_id: UUID, name: str) -> bool:
            capsys.readouterr()
            assert main(["--json", "signal", str(job_id), name]) == 0
            sent = json.loads(capsys.readouterr().out)
            assert sent["id"] == str(job_id) and sent["signal"] == name
            return bool(sent["woke"])

        return by_cli
    app = psycopg.connect(app_login_url, autocommit=True)
    request.addfinalizer(app.close)
    if way == "app store":
        return lambda job_id, name: StepStore(PostgresStore(app, user_id=ALICE)).signal(
            job_id, name
        )

    def by_sql(job_id: UUID, name: str) -> bool:
        with app.transaction():
            app.execute("select set_config('tickq.user_id', %s, true)", (str(ALICE),))
            row = app.execute("select tickq.signal(%s, %s)", (job_id, name)).fetchone()
        assert row is not None and isinstance(row[0], bool)
        return row[0]

    return by_sql


@pytest.mark.parametrize("way", WAYS)
def test_a_signal_wakes_only_a_job_waiting_for_a_signal_of_that_name(
    conn: psycopg.Connection, send: Send
) -> None:
    # Given three suspended jobs: one waits for the signal "approve", one for the signal
    # "reject", one sleeps under the name "approve" (a timer, not a signal)
    approve = suspended(conn, WaitKind.SIGNAL, "approve")
    reject = suspended(conn, WaitKind.SIGNAL, "reject")
    sleeper = suspended(conn, WaitKind.SLEEP, "approve")

    # When "approve" is sent to each
    woke = {job_id: send(job_id, "approve") for job_id in (approve, reject, sleeper)}

    # Then only the job waiting for that signal woke, and each send said whether it woke one
    assert woke == {approve: True, reject: False, sleeper: False}
    store = PostgresStore(conn)
    assert store.get(approve).run_after <= store.now()
    assert store.get(reject).run_after == FOREVER
    assert store.get(sleeper).run_after == FOREVER
    # And every signal was kept for its job, woken or not
    rows = conn.execute("select job_id from tickq.job_signals where name = 'approve'").fetchall()
    assert sorted(job_id for (job_id,) in rows) == sorted((approve, reject, sleeper))


@pytest.mark.parametrize("way", WAYS)
def test_a_signal_to_a_job_that_is_not_waiting_wakes_nothing(
    conn: psycopg.Connection, send: Send
) -> None:
    # Given a queued job that waits for nothing, due in an hour
    store = PostgresStore(conn)
    spec = validation.job_spec("approval", {}, user_id=ALICE, delay=3600)
    job_id = store.enqueue(spec).id
    due = store.get(job_id).run_after

    # When a signal is sent to it
    woke = send(job_id, "approve")

    # Then it says it woke nothing, and the job is still due when it was
    assert woke is False
    assert store.get(job_id).run_after == due > store.now()
