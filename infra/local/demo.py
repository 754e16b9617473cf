"""The demo's handlers: a realistic mix of AI back-end jobs with failures built in, two
durable-step jobs (a long transcription that crosses ticks, one waiting for approval), and a
workflow that fans out to child jobs and goes on with their results."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from queue_core import JobContext, PermanentError, PostgresStore, Registry, RetryAfter, StepStore
from queue_core.model.steps import WaitKind

# Each demo tick plays a function invocation of this many seconds: the long transcription
# needs several of them, and suspends between them.
TICK_SECONDS = 1.0

# Fast retries so the demo finishes in seconds; production defaults are 1 s doubling to 5 min.
_FAST = {"base": 0.2, "factor": 2.0, "max": 1.0}

demo = Registry()


@demo.task("embed", max_attempts=3, backoff=_FAST)
def embed(job: JobContext) -> dict[str, Any]:
    chunks = int(job.payload.get("chunks", 3))
    for done in range(1, chunks + 1):
        time.sleep(0.01)
        job.progress({"chunks": done, "of": chunks})
    return {"vectors": chunks * 4, "model": "text-embedding-3-small"}


@demo.task("transcribe", max_attempts=4, lease_seconds=60, backoff=_FAST)
def transcribe(job: JobContext) -> dict[str, Any]:
    # A flaky speech API: the first attempt times out, the retry succeeds.
    if job.attempt < 2 and job.payload.get("flaky"):
        raise TimeoutError("speech API timed out after 30 s")
    return {"words": 1200, "language": "ja"}


@demo.task("connector-sync", max_attempts=3, backoff=_FAST)
def connector_sync(job: JobContext) -> dict[str, Any]:
    # The connector's API rate-limits the first call; RetryAfter reschedules without an error.
    if job.snoozes == 0 and job.payload.get("rate_limited"):
        raise RetryAfter(0.3, "429 from connector, Retry-After: 0.3")
    return {"synced": job.payload.get("source", "drive"), "documents": 42}


@demo.task("extract", max_attempts=3, backoff=_FAST)
def extract(job: JobContext) -> dict[str, Any]:
    return {"doc": job.payload.get("doc"), "chunks": int(job.payload.get("chunks", 3))}


@demo.task("reindex", max_attempts=3, backoff=_FAST)
def reindex(job: JobContext) -> dict[str, Any]:
    if job.payload.get("index") == "missing":
        raise PermanentError("index 'missing' does not exist; retrying cannot help")
    if job.payload.get("after_embeddings"):  # the pipeline's last step: sums its parents
        vectors = sum(int(result["vectors"]) for result in job.parent_results.values())
        return {"reindexed": job.payload.get("index"), "vectors": vectors}
    return {"reindexed": job.payload.get("index")}


@demo.task("transcribe-long", lease_seconds=60, step_seconds=0.3, backoff=_FAST)
def transcribe_long(job: JobContext) -> dict[str, Any]:
    # A two-hour recording in parts: each part is a step, stored once; when the next part
    # would not fit in the invocation, the job suspends and the next tick resumes it.
    parts = int(job.payload.get("parts", 8))
    audio = job.step("fetch", lambda: {"url": job.payload["audio"], "parts": parts})
    words = 0
    for i in range(parts):
        words += job.step(f"part:{i}", partial(_transcribe_part, audio, i))
    return {"parts": parts, "words": words}


@demo.task("index-corpus", backoff=_FAST)
def index_corpus(job: JobContext) -> dict[str, Any]:
    # Fan-out inside a job: one embed child job per document, at most two runnable at once.
    # The job suspends (no worker held) until every child has ended, then resumes with
    # their results in the documents' order.
    docs = list(job.payload.get("docs", []))
    embedded = job.map(
        "embed-docs", "embed", [{"doc": d, "chunks": 2} for d in docs], max_concurrency=2
    )
    return {"documents": len(docs), "vectors": sum(int(e["vectors"]) for e in embedded)}


def _transcribe_part(audio: dict[str, Any], i: int) -> int:
    time.sleep(0.25)  # the speech API's latency
    return 900 + 37 * i


@demo.task("publish", backoff=_FAST)
def publish(job: JobContext) -> dict[str, Any]:
    # A draft waits for a person's approval (a signal) before it goes out.
    draft = job.step("draft", lambda: {"title": job.payload["title"], "words": 640})
    decision = job.wait_for("approve", timeout=3600)
    return {"published": draft["title"], "approved_by": decision.get("by")}


def approve_waiting(store: PostgresStore, ids: list[Any]) -> int:
    """Play the person: approve every demo job that waits for the "approve" signal."""
    approved = 0
    steps = StepStore(store)
    for job_id in ids:
        wait = steps.show(job_id).wait
        if wait is not None and wait.kind is WaitKind.SIGNAL and wait.name == "approve":
            steps.signal(job_id, "approve", {"by": "editor@example.com"})
            approved += 1
    return approved


def pipeline() -> list[dict[str, Any]]:
    """A small graph enqueued in one call: extract, then three embeds after it, then a
    reindex after all three ("after" names earlier positions of the same call)."""
    parts = [
        {"type": "embed", "payload": {"doc": "report.pdf", "part": n, "chunks": 2}, "after": [0]}
        for n in range(1, 4)
    ]
    return [
        {"type": "extract", "payload": {"doc": "report.pdf", "chunks": 3}},
        *parts,
        {
            "type": "reindex",
            "payload": {"index": "reports", "after_embeddings": True},
            "after": [1, 2, 3],
        },
    ]


def requests() -> list[dict[str, Any]]:
    """The demo's jobs: one uses an idempotency key twice, one fails for good."""
    return [
        {"type": "embed", "payload": {"doc": "handbook.pdf", "chunks": 5}, "priority": 5},
        {"type": "embed", "payload": {"doc": "faq.md", "chunks": 2}},
        {
            "type": "embed",
            "payload": {"doc": "faq.md", "chunks": 2},
            "idempotency_key": "embed:faq",
        },
        {
            "type": "embed",
            "payload": {"doc": "faq.md", "chunks": 2},
            "idempotency_key": "embed:faq",
        },
        {"type": "transcribe", "payload": {"audio": "standup.m4a", "flaky": True}},
        {"type": "transcribe", "payload": {"audio": "interview.wav"}},
        {"type": "connector-sync", "payload": {"source": "notion", "rate_limited": True}},
        {"type": "connector-sync", "payload": {"source": "drive"}, "queue": "default"},
        {"type": "reindex", "payload": {"index": "docs"}},
        {"type": "reindex", "payload": {"index": "missing"}},
        {"type": "transcribe-long", "payload": {"audio": "all-hands-2h.m4a", "parts": 8}},
        {"type": "publish", "payload": {"title": "Release notes 2.0"}},
        {
            "type": "index-corpus",
            "payload": {"docs": ["pricing.md", "security.md", "api.md", "changelog.md"]},
        },
    ]
