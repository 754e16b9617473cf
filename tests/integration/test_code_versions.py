"""Code versions and safe deploys against a real database: each durable run and step records
the code version it ran under, job.patched keeps old and new runs on their own branch, and
the deploy check replays stored histories against new code without running a step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import psycopg
import pytest

from queue_core import JobContext, PostgresStore, Registry, Runner, Status
from queue_core.deploys import deploy_check
from queue_core.errors import ConfigurationError
from queue_core.policies.limits import Limits, type_limit
from queue_core.postgres.deploys import unfinished_of_version

Handler = Callable[[JobContext], Any]


def registry_of(handler: Handler, type_: str = "ocr-doc") -> Registry:
    registry = Registry()
    registry.task(type_, max_attempts=3)(handler)
    return registry


def tick(
    store: PostgresStore, registry: Registry, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One tick of a worker whose code is `version`."""
    monkeypatch.setenv("TICKQ_CODE_VERSION", version)
    with Runner(store, registry, rand=lambda: 0.0) as runner:
        runner.tick()


def enqueue(store: PostgresStore, registry: Registry, payload: Any = None) -> UUID:
    return store.enqueue(registry.spec("ocr-doc", payload or {})).id


def v1(ran: list[str]) -> Handler:
    """Version 1: fetch, wait for approval, then store."""

    def handler(job: JobContext) -> Any:
        doc = job.step("fetch", lambda: ran.append("fetch") or "doc")
        job.wait_for("approve")
        return job.step("store", lambda: ran.append("store") or f"stored {doc}")

    return handler


def v2_renamed(ran: list[str]) -> Handler:
    """An unsafe version 2: the first step renamed."""

    def handler(job: JobContext) -> Any:
        doc = job.step("download", lambda: ran.append("download") or "doc")
        job.wait_for("approve")
        return job.step("store", lambda: ran.append("store") or f"stored {doc}")

    return handler


def v2_patched(ran: list[str]) -> Handler:
    """A safe version 2: an OCR step added between fetch and the wait, behind a patch."""

    def handler(job: JobContext) -> Any:
        doc = job.step("fetch", lambda: ran.append("fetch") or "doc")
        if job.patched("add-ocr"):
            doc = job.step("ocr", lambda: ran.append("ocr") or f"{doc}+ocr")
        job.wait_for("approve")
        return job.step("store", lambda: ran.append("store") or f"stored {doc}")

    return handler


def suspended_under_v1(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch, ran: list[str]
) -> UUID:
    registry = registry_of(v1(ran))
    job_id = enqueue(store, registry)
    tick(store, registry, "v1", monkeypatch)
    assert store.steps.show(job_id).wait is not None
    return job_id


def test_a_run_records_its_code_version_on_the_job_and_on_each_step_it_stores(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job that stored its first step under v1 and waits
    ran: list[str] = []
    job_id = suspended_under_v1(store, monkeypatch, ran)
    assert store.steps.show(job_id).code_version == "v1"

    # When it is signalled and finishes under v2 (the same steps)
    store.steps.signal(job_id, "approve", True)
    tick(store, registry_of(v1(ran)), "v2", monkeypatch)

    # Then the job shows v2, its last run's, and each step the version that stored it
    view = store.steps.show(job_id)
    assert store.get(job_id).status is Status.SUCCEEDED
    assert view.code_version == "v2"
    assert [(s["name"], s["code_version"]) for s in view.steps] == [
        ("fetch", "v1"),
        ("approve", "v2"),
        ("store", "v2"),
    ]
    assert view.to_dict()["code_version"] == "v2"


def test_patched_is_false_for_a_run_begun_under_older_code_and_true_for_a_new_one(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an old job suspended under v1 past the point the patch adds a step at
    ran: list[str] = []
    old = suspended_under_v1(store, monkeypatch, ran)
    patched = registry_of(v2_patched(ran))

    # When a new job starts under the patched v2, and both are approved and run to the end
    new = enqueue(store, patched)
    tick(store, patched, "v2", monkeypatch)
    for job_id in (old, new):
        store.steps.signal(job_id, "approve", True)
    tick(store, patched, "v2", monkeypatch)

    # Then the old job kept its path (no OCR) and the new one took the patched path
    assert store.get(old).result == "stored doc"
    assert store.get(new).result == "stored doc+ocr"
    assert [s["name"] for s in store.steps.show(old).steps] == ["fetch", "approve", "store"]
    assert [s["name"] for s in store.steps.show(new).steps] == [
        "fetch",
        "ocr",
        "approve",
        "store",
    ]
    # And the patch marker is on the new job's history only; each step ran once
    assert store.steps.show(new).to_dict()["patches"] == ["add-ocr"]
    assert store.steps.show(old).to_dict()["patches"] == []
    assert sorted(ran) == ["fetch", "fetch", "ocr", "store", "store"]


def test_the_deploy_check_names_a_job_whose_new_code_asks_for_another_step(
    conn: psycopg.Connection, store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job suspended under v1
    ran: list[str] = []
    job_id = suspended_under_v1(store, monkeypatch, ran)
    ran.clear()

    # When the check replays it against a v2 that renamed its first step
    found = deploy_check(conn, registry_of(v2_renamed(ran)).tasks)

    # Then it names the job, its type, its version, and where and how the code differs
    (broken,) = found.broken
    assert broken.to_dict() == {
        "id": str(job_id),
        "type": "ocr-doc",
        "status": "queued",
        "code_version": "v1",
        "stored_steps": 1,
        "replayed_steps": 0,
        "breaks": True,
        "position": 0,
        "stored": "fetch",
        "asked": "download",
        "reason": "asks for 'download' where its history has 'fetch'",
    }
    # And no step function ran
    assert ran == []


def test_the_deploy_check_passes_a_patched_change_without_running_a_step(
    conn: psycopg.Connection, store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []
    job_id = suspended_under_v1(store, monkeypatch, ran)
    ran.clear()
    before = conn.execute("select count(*) from tickq.jobs").fetchone()

    found = deploy_check(conn, registry_of(v2_patched(ran)).tasks)

    assert found.broken == []
    assert [r.history.job.id for r in found.replays] == [job_id]
    assert found.replays[0].replayed == 1
    # The old history lacks the marker: the patch may not be retired yet
    assert found.to_dict()["patches"] == [{"name": "add-ocr", "lacking": 1, "retirable": False}]
    assert ran == []
    assert conn.execute("select count(*) from tickq.jobs").fetchone() == before


def test_the_deploy_check_names_an_unsafe_insert_before_the_point_a_job_waits_at(
    conn: psycopg.Connection, store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job waiting for its signal under v1
    ran: list[str] = []
    suspended_under_v1(store, monkeypatch, ran)

    def unpatched(job: JobContext) -> Any:
        job.step("fetch", lambda: "doc")
        job.step("ocr", lambda: "ocr")  # added without job.patched
        job.wait_for("approve")

    # Then the check names the added step: the job already passed that point
    (broken,) = deploy_check(conn, registry_of(unpatched).tasks).broken
    assert (broken.broken and broken.broken.stored, broken.broken.asked) == ("approve", "ocr")


def test_a_deprecated_patch_breaks_histories_that_lack_it_and_is_retirable_once_none_do(
    conn: psycopg.Connection, store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []
    old = suspended_under_v1(store, monkeypatch, ran)

    def deprecated(job: JobContext) -> Any:
        doc = job.step("fetch", lambda: "doc")
        job.deprecate_patch("add-ocr")
        job.step("ocr", lambda: f"{doc}+ocr")
        job.wait_for("approve")
        return job.step("store", lambda: "stored")

    # While the old history (no marker) is unfinished, the deprecation breaks it
    (broken,) = deploy_check(conn, registry_of(deprecated).tasks).broken
    assert broken.history.job.id == old
    assert "deprecates patch 'add-ocr'" in (broken.broken.reason if broken.broken else "")

    # Once only patched histories are left, nothing lacks the marker
    store.steps.signal(old, "approve", True)
    tick(store, registry_of(v1(ran)), "v1", monkeypatch)
    patched = registry_of(v2_patched(ran))
    enqueue(store, patched)
    tick(store, patched, "v2", monkeypatch)
    found = deploy_check(conn, registry_of(deprecated).tasks)
    assert found.broken == []
    assert found.to_dict()["patches"] == [{"name": "add-ocr", "lacking": 0, "retirable": True}]


def test_the_deploy_check_enqueues_no_map_children_and_writes_nothing(
    conn: psycopg.Connection, store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a parent suspended under v1 waiting for the children of its map step
    registry = Registry()

    @registry.task("part")
    def part(job: JobContext) -> int:
        job.wait_for("go")  # children wait, so their parent does
        return int(job.payload["n"])

    @registry.task("parent")
    def parent(job: JobContext) -> int:
        job.step("plan", lambda: 2)
        job.progress("mapping")
        return sum(job.map("parts", "part", [{"n": 1}, {"n": 2}]))

    job_id = store.enqueue(registry.spec("parent", {})).id
    tick(store, registry, "v1", monkeypatch)
    counts = conn.execute("select status, count(*) from tickq.jobs group by 1 order by 1")
    before = counts.fetchall()
    progress = store.get(job_id).progress

    # When the check replays it (its map reached again, where the job stopped)
    found = deploy_check(conn, registry.tasks)

    # Then it replays, and nothing changed: no child enqueued, no progress written
    assert [r.history.job.id for r in found.replays if r.history.job.type == "parent"] == [job_id]
    assert found.broken == []
    counts = conn.execute("select status, count(*) from tickq.jobs group by 1 order by 1")
    assert counts.fetchall() == before
    assert store.get(job_id).progress == progress == "mapping"


def test_drained_counts_the_unfinished_jobs_that_last_ran_under_a_version(
    conn: psycopg.Connection, store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []
    job_id = suspended_under_v1(store, monkeypatch, ran)

    assert unfinished_of_version(conn, "v1") == {"queued": 1}
    assert unfinished_of_version(conn, "v2") == {}

    store.steps.signal(job_id, "approve", True)
    tick(store, registry_of(v1(ran)), "v1", monkeypatch)
    assert unfinished_of_version(conn, "v1") == {}


@pytest.fixture
def store(conn: psycopg.Connection) -> PostgresStore:
    return PostgresStore(conn)


def test_a_pinned_store_claims_only_jobs_not_yet_run_or_last_run_under_its_version(
    conn: psycopg.Connection, store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job last run under v1, and a job not yet run
    ran: list[str] = []
    old = suspended_under_v1(store, monkeypatch, ran)
    store.steps.signal(old, "approve", True)
    fresh = enqueue(store, registry_of(v1(ran)))

    # Then a store pinned to v2 claims only the fresh one, one pinned to v1 the old one
    claimed = PostgresStore(conn, pin_version="v2").claim(limit=10)
    assert [j.id for j in claimed] == [fresh]
    claimed = PostgresStore(conn, pin_version="v1").claim(limit=10)
    assert [j.id for j in claimed] == [old]


def test_a_pinned_store_refuses_a_claim_under_type_limits_rather_than_ignore_the_pin(
    conn: psycopg.Connection, store: PostgresStore
) -> None:
    Limits(conn).set_type(type_limit("ocr-doc", max_running=5))
    job_id = enqueue(store, registry_of(v1([])))

    with pytest.raises(ConfigurationError, match="TICKQ_PIN_VERSION"):
        PostgresStore(conn, pin_version="v1").claim(limit=10)
    assert store.get(job_id).status is Status.QUEUED
