"""The claim order and the "runnable" condition are written once, in queries.sql's parts
(pick_in_claim_order, pick_runnable), and every other claim variant is held to them here:
the limited and fair claims (their functions cannot splice a part), the indexes the claims
walk, and the Python order a claimed batch runs in. A variant changed alone fails here; the
rule changed everywhere at once passes."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from queue_core.migrate import schema_files
from queue_core.model import transitions
from queue_core.model.jobs import RUNNABLE, Job
from tests.schema.sqltext import normalized
from tests.unit.factory import queued_job

# The parts every claim shares are in the claim's statement file.
QUERIES = (
    Path(__file__).resolve().parents[2] / "queue_core" / "postgres" / "claim.sql"
).read_text()
FILES = dict(schema_files())
CLAIM_FUNCTIONS = ("functions/claim_limited.sql", "functions/claim_fair.sql")
_PART = re.compile(r"^-- (?:name|part): (\w+)\s*$", re.MULTILINE)


def part(name: str) -> str:
    """One part of queries.sql, normalized (comments dropped)."""
    pieces = _PART.split(QUERIES)
    found = dict(zip(pieces[1::2], pieces[2::2], strict=True))
    return normalized(found[name])


def unaliased(text: str) -> str:
    """Normalized SQL without the one-letter table aliases of the claim functions."""
    return re.sub(r"\b[a-z]\.(?=[a-z_])", "", text)


def keys(clause: str) -> tuple[str, ...]:
    return tuple(unaliased(key).strip() for key in clause.split(","))


def order_clauses(text: str) -> list[tuple[int, tuple[str, ...], bool]]:
    """(offset, keys, in a window) of every ORDER BY of a normalized text, each read up to
    the LIMIT, FOR, closing parenthesis or end of statement that ends it."""
    found = []
    for match in re.finditer(r"order by (.+?)(?= limit\b| for\b|\)|;|$)", text):
        window = text[: match.start()].endswith("over(") or bool(
            re.search(r"over\((?:partition by [^()]*?)? ?$", text[: match.start()])
        )
        found.append((match.start(), keys(match.group(1)), window))
    return found


ORDER = keys(re.search(r"order by (.+?) limit\b", part("pick_in_claim_order")).group(1))  # type: ignore[union-attr]
COLUMNS = {key.split()[0] for key in ORDER}
# The runnable condition: a status among the runnable ones, due by the claim's clock.
_WHERE = part("pick_runnable").split(" where ", 1)[1]
STATUS, DUE = (conjunct.strip() for conjunct in re.split(r"\band\b", _WHERE)[:2])
DUE_LEFT = DUE.split("<=")[0] + "<="


def test_the_shared_parts_state_an_order_of_job_columns_and_the_runnable_statuses() -> None:
    assert len(ORDER) >= 2 and set(Job.__dataclass_fields__) >= COLUMNS
    assert DUE_LEFT == "run_after<="
    assert {status.value for status in RUNNABLE} == set(re.findall(r"'(\w+)'", STATUS))


@pytest.mark.parametrize("path", CLAIM_FUNCTIONS)
def test_every_claim_function_orders_jobs_by_the_shared_claim_order(path: str) -> None:
    # Every ORDER BY over the order's columns is the shared order, or (the fair claim, one
    # priority level at a time) its first key to choose a level, or the rest within it.
    text = normalized(FILES[path])
    allowed = {ORDER, ORDER[:1], ORDER[1:]}
    ordered = [
        found for _, found, _ in order_clauses(text) if COLUMNS & {k.split()[0] for k in found}
    ]
    assert ordered, f"{path} orders no jobs"
    assert [found for found in ordered if found not in allowed] == []


@pytest.mark.parametrize("path", CLAIM_FUNCTIONS)
def test_every_claim_function_picks_only_runnable_jobs(path: str) -> None:
    # The select around each such ORDER BY (not a window's) reads tickq.jobs under the
    # shared runnable condition.
    text = normalized(FILES[path])
    for at, found, window in order_clauses(text):
        if window or not COLUMNS & {k.split()[0] for k in found}:
            continue
        select = unaliased(text[text.rindex("from tickq.jobs", 0, at) : at])
        assert STATUS in select, f"{path}: {select!r} does not pick by status as the claim does"
        assert DUE_LEFT in select, f"{path}: {select!r} does not pick by run_after"
        if found == ORDER[1:]:  # within one priority level: the select names the level
            assert f"{ORDER[0].split()[0]}=" in select, f"{path}: {select!r} spans levels"


def index(name: str) -> tuple[list[str], str]:
    """The columns (top-level, normalized) and predicate of an index of tables.sql."""
    text = normalized(FILES["tables.sql"])
    start = text.index(f"create index {name} on ")
    opened = text.index("(", start)
    depth, columns, current = 0, [], ""
    for i in range(opened + 1, len(text)):
        char = text[i]
        if char == ")" and depth == 0:
            columns.append(current)
            rest = text[i + 1 : text.index(";", i)]
            return [c.strip() for c in columns], rest.removeprefix("where ").strip()
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            columns.append(current)
            current = ""
        else:
            current += char
    raise AssertionError(f"index {name} is not closed")


def test_the_claim_indexes_hold_the_runnable_jobs_in_claim_order() -> None:
    claim_columns, claim_where = index("jobs_claim_idx")
    fair_columns, fair_where = index("jobs_fair_idx")
    assert tuple(claim_columns) == ("queue", *ORDER) and claim_where == STATUS
    # The fair claim's: by level, then tenant and group, then the rest of the order.
    assert tuple(fair_columns[:2]) == ("queue", ORDER[0])
    assert tuple(fair_columns[-len(ORDER[1:]) :]) == ORDER[1:] and fair_where == STATUS


def test_a_claimed_batch_runs_in_the_shared_claim_order() -> None:
    # For each key of the order in turn: a job better on that key and worse on every later
    # one comes before a job equal to it on the earlier keys.
    base = queued_job()
    for i, key in enumerate(ORDER):
        first = shifted(base, key, worse=False)
        for later_key in ORDER[i + 1 :]:
            first = shifted(first, later_key, worse=True)
        assert sorted([base, first], key=transitions.claim_order) == [first, base], key


def shifted(job: Job, key: str, *, worse: bool) -> Job:
    """The job one step worse (or better) on one key of the claim order."""
    column = key.split()[0]
    larger = worse != key.endswith(" desc")  # a larger value is worse for an ascending key
    step = timedelta(seconds=1) if column in ("run_after", "created_at") else 1
    value = getattr(job, column)
    return replace(job, **{column: value + step if larger else value - step})
