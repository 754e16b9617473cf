"""Task settings are the workers', not the enqueuer's.

A task's max_attempts, backoff and lease applied only if the enqueuing process had imported
the handler's module: `@task("probe", lease_seconds=120, max_attempts=7)` gave 7 attempts
and a 120 s lease from a CLI with the module loaded, but 3 attempts and the default lease
from a CLI without it and from SQL `tickq.enqueue`. Now workers publish their registry's
settings to the task catalogue, and every enqueue path fills what its caller left out from
there; once the catalogue knows any type, a type it does not know is refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any
from uuid import UUID, uuid4

import psycopg
import psycopg.errors
import pytest

import queue_core
from queue_core import Backoff, JobContext, PostgresStore, Registry
from queue_core.errors import InvalidJob, UnknownJobType
from queue_core.model import catalog
from queue_core.policies.schedules import Schedules
from queue_core.postgres import catalog as task_catalog

PROBE = {"max_attempts": 7, "lease_seconds": 120, "backoff": (5.0, 3.0, 600.0, 0.25)}


def workers_registry() -> Registry:
    registry = Registry()

    @registry.task(
        "probe",
        queue="probes",
        max_attempts=7,
        lease_seconds=120,
        backoff=Backoff(base=5, factor=3, max=600, jitter=0.25),
    )
    def probe(job: JobContext) -> Any:
        return None

    return registry


def settings_of(conn: psycopg.Connection, job_id: UUID) -> dict[str, Any]:
    row = conn.execute(
        "select queue, max_attempts, lease_seconds,"
        " array[backoff_base, backoff_factor, backoff_max, backoff_jitter]"
        " from tickq.jobs where id = %s",
        (job_id,),
    ).fetchone()
    assert row is not None
    return {
        "queue": row[0],
        "max_attempts": row[1],
        "lease_seconds": row[2],
        "backoff": tuple(row[3]),
    }


EXPECTED = {"queue": "probes", **PROBE}


@pytest.fixture
def published(conn: psycopg.Connection) -> list[str]:
    return task_catalog.publish(conn, workers_registry())


def test_a_worker_publishes_its_tasks_with_their_code_version(
    conn: psycopg.Connection, published: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert published == ["probe"]
    (entry,) = task_catalog.entries(conn)
    assert entry["defaults"] == {
        "queue": "probes",
        "max_attempts": 7,
        "lease_seconds": 120,
        "backoff": {"base": 5.0, "factor": 3.0, "max": 600.0, "jitter": 0.25},
    }
    assert entry["code_version"].startswith("source:")
    monkeypatch.setenv("TICKQ_CODE_VERSION", "v42")
    task_catalog.publish(conn, workers_registry())
    assert task_catalog.entries(conn)[0]["code_version"] == "v42"


def test_python_without_the_module_gets_the_tasks_settings(
    conn: psycopg.Connection, published: list[str]
) -> None:
    bare = Registry()  # a web process that never imported the handlers
    single = queue_core.enqueue(conn, "probe", {"n": 1}, using=bare)
    (many,) = queue_core.enqueue_many(conn, [{"type": "probe"}], using=bare)
    for job_id in (single.id, many.id):
        assert settings_of(conn, job_id) == EXPECTED
    # What the caller sets wins.
    own = queue_core.enqueue(conn, "probe", max_attempts=2, using=bare)
    assert settings_of(conn, own.id)["max_attempts"] == 2


def test_sql_enqueue_gets_the_tasks_settings_as_a_worker_and_as_an_application(
    conn: psycopg.Connection, published: list[str], app_login_url: str
) -> None:
    worker_job = conn.execute("select tickq.enqueue('probe')").fetchone()
    assert worker_job is not None
    assert settings_of(conn, worker_job[0]) == EXPECTED
    user = uuid4()
    with psycopg.connect(app_login_url) as app:
        app.execute("select set_config('tickq.user_id', %s, true)", (str(user),))
        (app_job,) = app.execute("select tickq.enqueue('probe')").fetchone() or ()
        (many,) = (
            app.execute(
                'select id from tickq.enqueue_many(\'[{"type": "probe", "max_attempts": 4}]\')'
            ).fetchone()
            or ()
        )
        app.commit()
    assert settings_of(conn, app_job) == EXPECTED
    assert settings_of(conn, many) == {**EXPECTED, "max_attempts": 4}


def test_an_application_users_store_gets_them_too(
    conn: psycopg.Connection, published: list[str], app_login_url: str
) -> None:
    user = uuid4()
    with psycopg.connect(app_login_url, autocommit=True) as app:
        store = PostgresStore(app, user_id=user)
        spec = Registry().spec("probe", {}, user_id=user, catalog=store.task_catalog())
        job = store.enqueue(spec)
    assert settings_of(conn, job.id) == EXPECTED


def test_a_type_the_catalogue_does_not_know_is_refused_once_it_knows_any(
    conn: psycopg.Connection, published: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UnknownJobType, match="probe"):
        queue_core.enqueue(conn, "prboe", using=Registry())
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="not in the task catalogue"):
        conn.execute("select tickq.enqueue('prboe')")
    with pytest.raises(InvalidJob, match="probe"):
        Schedules(conn).add(
            "nightly", "0 3 * * *", "prboe", {}, known_types=set(PostgresStore(conn).task_catalog())
        )
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == (0,)
    # A deployment that enqueues types no worker publishes says so.
    monkeypatch.setenv(catalog.ACCEPT_UNKNOWN_ENV, "on")
    assert queue_core.enqueue(conn, "other", using=Registry()).id
    with conn.transaction():
        conn.execute("set local tickq.accept_unknown_types = on")
        conn.execute("select tickq.enqueue('other')")


def test_an_empty_catalogue_accepts_any_type(conn: psycopg.Connection) -> None:
    assert queue_core.enqueue(conn, "anything", using=Registry()).id
    assert conn.execute("select tickq.enqueue('whatever')").fetchone()


def test_the_cli_syncs_and_lists_the_catalogue_and_enqueues_with_it(
    conn: psycopg.Connection, database_url: str, tmp_path: Any
) -> None:
    module = tmp_path / "probe_tasks.py"
    module.write_text(
        "from queue_core import Backoff, registry\n"
        "@registry.task('probe', queue='probes', max_attempts=7, lease_seconds=120,\n"
        "               backoff=Backoff(base=5, factor=3, max=600, jitter=0.25))\n"
        "def probe(job):\n"
        "    return None\n"
    )
    env = {"TICKQ_DATABASE_URL": database_url, "PYTHONPATH": str(tmp_path), "PATH": "/usr/bin"}

    def tickq(*args: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "tickq.infra.cli.program", "--json", *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    synced = tickq("tasks", "sync", "--tasks", "probe_tasks")
    assert synced["published"] == ["probe"]
    listed = tickq("tasks")
    assert [row["type"] for row in listed] == ["probe"]
    # A CLI without the module: the catalogue's settings.
    enqueued = tickq("enqueue", "probe")
    assert settings_of(conn, UUID(enqueued["id"])) == EXPECTED


def test_a_tasks_timeout_and_a_schedules_jobs_follow_the_catalogue(
    conn: psycopg.Connection,
) -> None:
    registry = Registry()

    @registry.task(
        "render",
        queue="renders",
        max_attempts=6,
        lease_seconds=90,
        timeout=30,
        backoff=Backoff(base=2, factor=4, max=60, jitter=0),
    )
    def render(job: JobContext) -> Any:
        return None

    task_catalog.publish(conn, registry)
    (entry,) = task_catalog.entries(conn)
    assert entry["defaults"]["timeout"] == 30

    def timeout_of(job_id: UUID) -> Any:
        row = conn.execute("select timeout_seconds from tickq.jobs where id = %s", (job_id,))
        return row.fetchone()[0]  # type: ignore[index]

    from_sql = conn.execute("select tickq.enqueue('render')").fetchone()
    bare = queue_core.enqueue(conn, "render", using=Registry())
    assert from_sql is not None
    expected = {"queue": "renders", "max_attempts": 6, "lease_seconds": 90}
    expected["backoff"] = (2.0, 4.0, 60.0, 0.0)
    for job_id in (from_sql[0], bare.id):
        assert settings_of(conn, job_id) == expected
        assert timeout_of(job_id) == 30

    # A schedule added without settings: its jobs get the task's, lease and timeout included.
    schedules = Schedules(conn)
    added = schedules.add("nightly", "0 3 * * *", "render", now=_utc(2020, 1, 1))
    assert (added.queue, added.max_attempts) == ("renders", 6)
    report = schedules.run(now=_utc(2020, 1, 1, 3, 0, 5))
    (fired,) = report.jobs
    assert settings_of(conn, UUID(fired)) == expected
    assert timeout_of(UUID(fired)) == 30


def _utc(*parts: int) -> Any:
    from datetime import UTC, datetime

    return datetime(*parts, tzinfo=UTC)
