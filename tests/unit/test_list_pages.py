"""Pages of lists bounded in bytes: large values left out and named in "truncated", a page
cut short at its budget with its cursor after the last job it holds."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any
from uuid import UUID

from queue_core.model.pages import (
    LIST_ERROR_CHARS,
    LIST_VALUE_BYTES,
    MAX_PAGE_BYTES,
    cursor_at,
    decode_cursor,
    fit_page,
    json_bytes,
    listed,
)
from queue_core.model.validation import job_spec
from queue_core.store.memory import MemoryStore

from .factory import NOW, later, queued_job


def entry(n: int, size: int = 10) -> dict[str, Any]:
    job = queued_job(now=later(-n))
    return {"id": str(job.id), "created_at": job.created_at.isoformat(), "text": "x" * size}


def test_a_page_that_fits_is_whole_and_says_whether_more_follow() -> None:
    entries = [entry(n) for n in range(4)]

    assert fit_page(entries[:3], 3) == (entries[:3], None)
    kept, cursor = fit_page(entries, 3)  # the statement read limit + 1
    assert kept == entries[:3]
    assert cursor == cursor_at(later(-2), UUID(entries[2]["id"]))
    assert fit_page([], 3) == ([], None)


def test_a_page_stops_before_the_entry_that_would_pass_its_budget() -> None:
    entries = [entry(n, 400) for n in range(5)]
    one = json_bytes(entries[0])
    budget = 2 + 3 * one + 2 * 2  # brackets, three entries and the two ", " between them

    kept, cursor = fit_page(entries, 5, max_bytes=budget)

    assert kept == entries[:3] and len(json.dumps(kept)) == budget
    assert cursor is not None and str(decode_cursor(cursor)[1]) == entries[2]["id"]
    kept, _ = fit_page(entries, 5, max_bytes=budget - 1)
    assert kept == entries[:2]


def test_a_page_holds_one_entry_at_least_whatever_its_size() -> None:
    entries = [entry(0, 100), entry(1)]

    kept, cursor = fit_page(entries, 5, max_bytes=10)

    assert kept == entries[:1] and cursor is not None
    assert str(decode_cursor(cursor)[1]) == entries[0]["id"]


def test_a_listed_job_keeps_small_values_and_names_the_left_out_ones_with_their_bytes() -> None:
    small = queued_job()
    assert listed(small) == {**small.to_dict(), "truncated": {}}

    big = "é" * LIST_VALUE_BYTES  # twice LIST_VALUE_BYTES of UTF-8
    error = "✓" * (LIST_ERROR_CHARS + 1)
    job = replace(
        queued_job(), payload={"text": big}, result=big, progress={"done": 1}, error=error
    )
    shown = listed(job)

    assert (shown["payload"], shown["result"], shown["progress"]) == (None, None, {"done": 1})
    assert shown["error"] == "✓" * LIST_ERROR_CHARS
    assert shown["truncated"] == {
        "payload": len('{"text":""}') + 2 * LIST_VALUE_BYTES,
        "result": len('""') + 2 * LIST_VALUE_BYTES,
        "error": 3 * (LIST_ERROR_CHARS + 1),  # "✓" is 3 bytes of UTF-8
    }


def test_the_memory_stores_listing_is_cut_at_the_page_budget_and_goes_on_from_there() -> None:
    store = MemoryStore(clock=lambda: NOW)
    # Each job lists an error of LIST_ERROR_CHARS emoji: 12 bytes each once escaped.
    emoji = "\N{GRINNING FACE}" * 1000
    for n in range(600):
        job = store.enqueue(job_spec("t", {"n": n}), now=later(n)).job
        assert job is not None
        store._jobs[job.id] = replace(job, error=emoji)

    seen: list[int] = []
    sizes: list[int] = []
    cursor = None
    while True:
        page = store.search_listed({}, limit=500, cursor=cursor)
        sizes.append(json_bytes(page.jobs))
        seen += [j["payload"]["n"] for j in page.jobs]
        cursor = page.next_cursor
        if cursor is None:
            break

    assert max(sizes) <= MAX_PAGE_BYTES < sum(sizes)
    assert seen == list(range(599, -1, -1))
