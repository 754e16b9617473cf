"""A user's durable job with a parent and a child, every part of it holding a secret, for
the tests of what an operator sees of another user's job (SQL, API and browser)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from uuid import UUID

import psycopg

import queue_core
from queue_core import PostgresStore, StepStore
from queue_core.model.steps import FOREVER, WaitKind

# One marker per place that holds the user's data; none may reach an operator.
SECRETS = {
    "payload": "secret-payload-7f3a",
    "result": "secret-result-91c2",
    "step result": "secret-step-result-4d8e",
    "signal payload": "secret-signal-payload-b605",
}


@dataclass(frozen=True, slots=True)
class Pipeline:
    parent: UUID  # succeeded, its result a secret
    job: UUID  # the durable job: two steps done, waiting for the signal "approve"
    child: UUID  # waiting for the durable job


# The code version the scene's durable job stored its first step under (its second and
# its suspension: "v2", a deploy in between).
SCENE_VERSION = "v1"


def durable_pipeline(conn: psycopg.Connection, owner: UUID) -> Pipeline:
    """An `extract` that succeeded, a `transcribe` after it with the steps "fetch" and
    "part:0" stored and a signal "note" kept, suspended until "approve", and an `embed`
    waiting for it: all the owner's."""
    store = PostgresStore(conn)
    parent = queue_core.enqueue(conn, "extract", {"doc": SECRETS["payload"]}, user_id=owner).id
    (extract,) = store.claim(limit=1)
    store.complete(extract, {"text": SECRETS["result"]})
    job = queue_core.enqueue(
        conn, "transcribe", {"audio": SECRETS["payload"]}, after=[parent], user_id=owner
    ).id
    (claimed,) = store.claim(limit=1)
    assert claimed.id == job and claimed.lease_token is not None
    steps = StepStore(store)
    token = claimed.lease_token
    fetched = json.dumps({"url": SECRETS["step result"]})
    steps.complete(job, token, "fetch", fetched, code_version=SCENE_VERSION)
    steps.complete(job, token, "part:0", json.dumps(SECRETS["step result"]), code_version="v2")
    steps.suspend(
        job, token, kind=WaitKind.SIGNAL, name="approve", until=FOREVER, code_version="v2"
    )
    steps.signal(job, "note", {"text": SECRETS["signal payload"]})
    child = queue_core.enqueue(
        conn, "embed", {"doc": SECRETS["payload"]}, after=[job], user_id=owner
    ).id
    return Pipeline(parent, job, child)


def leaked(text: str) -> list[str]:
    """Which of the secrets a text an operator was shown holds."""
    return [where for where, secret in SECRETS.items() if secret in text]
