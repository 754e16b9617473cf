"""The column bounds of queue_core/bounds.py, held by the tables for every role.

* The numbers in the constraints are the Python constants, read back out of pg_constraint,
  so a change to one side alone fails here; tickq.jobs's constraints are on every one of
  its partitions, and on a day partition made later.
* Every bound refuses a value just outside it (SQLSTATE 23514, naming the constraint) and
  takes one just inside it, on insert and on update, as the tables' owner, as a worker and
  as an application user (where its grants let it write the column at all; its updates
  meet the guard first, tickq.jobs_app_guard, and the check wherever the guard lets them
  through). Values that compress well are measured as they are, not as stored.
* Migration 0031_column_bounds brings rows an earlier version let in inside the bounds, so
  it can add them, and the engine reads those rows afterwards.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from psycopg import sql

from queue_core import bounds
from queue_core.errors import InvalidJob
from queue_core.model import json_text, validation
from queue_core.model.backoff import Backoff
from queue_core.model.steps import MAX_STEPS, UNDO_TRIES
from tests.conftest import connection_factory

CHECK_VIOLATION = "23514"
EARLIEST, LATEST = bounds.EARLIEST, bounds.LATEST
TICK = timedelta(microseconds=1)
OUT_OF_RANGE_TIMES: list[Any] = ["-infinity", "infinity", EARLIEST - TICK, LATEST + TICK]
MIB = 1024 * 1024


# -- The numbers in the constraints are the constants ------------------------------------

BOTH_TIMES = [EARLIEST, LATEST]

# (table, constraint) -> the numbers in its definition in order, and its times in order.
CONSTRAINTS: dict[tuple[str, str], tuple[list[float], list[datetime]]] = {
    ("tickq.jobs", "jobs_attempts_check"): ([0], []),
    ("tickq.jobs", "jobs_max_attempts_check"): ([1, bounds.MAX_ATTEMPTS], []),
    ("tickq.jobs", "jobs_lease_seconds_check"): ([1, bounds.MAX_LEASE_SECONDS], []),
    ("tickq.jobs", "jobs_backoff_check"): (
        [
            0,
            bounds.MAX_BACKOFF_BASE,
            bounds.MIN_BACKOFF_FACTOR,
            bounds.MAX_BACKOFF_FACTOR,
            bounds.MAX_BACKOFF_MAX,
            0,
            1,
        ],
        [],
    ),
    ("tickq.jobs", "jobs_resumes_check"): ([0], []),
    ("tickq.jobs", "jobs_times_check"): ([], BOTH_TIMES * 7),
    ("tickq.jobs", "jobs_names_check"): (
        [bounds.MAX_NAME, bounds.MAX_NAME, bounds.MAX_KEY, bounds.MAX_NAME],
        [],
    ),
    ("tickq.jobs", "jobs_group_key_check"): ([bounds.MAX_NAME], []),
    ("tickq.jobs", "jobs_error_check"): ([bounds.MAX_ERROR_BYTES], []),
    ("tickq.jobs", "jobs_signals_check"): (
        [bounds.MAX_SIGNALS, bounds.MAX_SIGNAL_NAMES_BYTES],
        [],
    ),
    ("tickq.jobs", "jobs_payload_size_check"): ([bounds.MAX_PAYLOAD_STORED], []),
    ("tickq.jobs", "jobs_result_size_check"): ([bounds.MAX_RESULT_STORED], []),
    ("tickq.jobs", "jobs_progress_size_check"): ([bounds.MAX_PROGRESS_STORED], []),
    ("tickq.jobs", "jobs_errors_check"): ([bounds.MAX_ERRORS_STORED], []),
    # The depth is in the jsonpath's text (test_the_depth_in_the_checks_is_the_python_bound).
    ("tickq.jobs", "jobs_json_depth_check"): ([], []),
    ("tickq.job_steps", "job_steps_result_depth_check"): ([], []),
    ("tickq.job_signals", "job_signals_payload_depth_check"): ([], []),
    ("tickq.schedules", "schedules_payload_depth_check"): ([], []),
    ("tickq.job_gates", "job_gates_key_check"): ([bounds.MAX_KEY], []),
    ("tickq.job_gates", "job_gates_first_at_check"): ([], BOTH_TIMES),
    ("tickq.job_steps", "job_steps_name_check"): ([bounds.MAX_NAME], []),
    ("tickq.job_steps", "job_steps_result_size_check"): ([bounds.MAX_STEP_RESULT_STORED], []),
    ("tickq.job_steps", "job_steps_size_check"): ([0, bounds.MAX_STEP_BYTES], []),
    ("tickq.job_steps", "job_steps_finished_at_check"): ([], BOTH_TIMES),
    ("tickq.job_signals", "job_signals_name_check"): ([bounds.MAX_NAME], []),
    ("tickq.job_signals", "job_signals_payload_size_check"): (
        [bounds.MAX_SIGNAL_PAYLOAD_STORED],
        [],
    ),
    ("tickq.job_signals", "job_signals_size_check"): ([0, bounds.MAX_SIGNAL_BYTES], []),
    ("tickq.job_signals", "job_signals_sent_at_check"): ([], BOTH_TIMES),
    ("tickq.job_step_tries", "job_step_tries_name_check"): ([bounds.MAX_NAME], []),
    ("tickq.job_step_tries", "job_step_tries_error_check"): ([bounds.MAX_ERROR_BYTES], []),
    ("tickq.job_step_tries", "job_step_tries_times_check"): ([], BOTH_TIMES * 2),
    ("tickq.job_children", "job_children_step_check"): ([bounds.MAX_NAME], []),
    ("tickq.schedules", "schedules_max_attempts_check"): ([1, bounds.MAX_ATTEMPTS], []),
    ("tickq.schedules", "schedules_payload_size_check"): ([bounds.MAX_PAYLOAD_STORED], []),
    ("tickq.schedules", "schedules_names_check"): ([bounds.MAX_NAME] * 3, []),
    ("tickq.schedules", "schedules_times_check"): ([], BOTH_TIMES * 4),
    ("tickq.type_limits", "type_limits_rate_check"): (
        [1, bounds.MAX_RATE, 0, bounds.MAX_PERIOD_SECONDS],
        [],
    ),
    ("tickq.retention_policies", "retention_policies_max_age_check"): (
        [0, bounds.MAX_AGE_SECONDS],
        [],
    ),
    ("tickq.queue_pauses", "queue_pauses_reason_check"): ([bounds.MAX_REASON], []),
    ("tickq.queue_pauses", "queue_pauses_paused_by_check"): ([bounds.MAX_PAUSED_BY], []),
    ("tickq.queue_pauses", "queue_pauses_paused_at_check"): ([], BOTH_TIMES),
    ("tickq.outbox", "outbox_detail_check"): ([bounds.MAX_OUTBOX_DETAIL_BYTES], []),
    ("tickq.outbox", "outbox_last_error_check"): ([bounds.MAX_ERROR_BYTES], []),
    ("tickq.outbox", "outbox_times_check"): ([], BOTH_TIMES * 2),
}

# A number a cast wrote in quotes ('3153600000'::bigint), any other quoted literal, a number.
_QUOTED_NUMBER = re.compile(r"'(\d+(?:\.\d+)?)'::(?:bigint|numeric|integer)")
_QUOTED = re.compile(r"'(?:[^']|'')*'")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.])")
_TIME = re.compile(r"'([^']*)'::timestamp with time zone")


def numbers_in(definition: str) -> list[float]:
    """The numbers of a constraint's definition in order, quoted strings left out."""
    text = _QUOTED.sub("''", _QUOTED_NUMBER.sub(r"\1", definition))
    return [float(n) for n in _NUMBER.findall(text)]


def times_in(definition: str) -> list[datetime]:
    """The timestamptz literals of a definition in order (read in UTC)."""
    return [datetime.fromisoformat(t) for t in _TIME.findall(definition)]


def definitions(url: str) -> dict[tuple[str, str], str]:
    with psycopg.connect(url) as conn:
        conn.execute("set timezone = 'UTC'")
        rows = conn.execute(
            "select conrelid::regclass::text, conname, pg_get_constraintdef(oid)"
            " from pg_constraint where connamespace = 'tickq'::regnamespace and contype = 'c'"
        ).fetchall()
    return {(table, name): definition for table, name, definition in rows}


def test_the_numbers_in_the_constraints_are_the_python_bounds(database_url: str) -> None:
    found = definitions(database_url)

    wrong = []
    for key, (expected_numbers, expected_times) in CONSTRAINTS.items():
        definition = found.get(key)
        if definition is None:
            wrong.append(f"{key}: missing")
            continue
        got = (numbers_in(definition), times_in(definition))
        if got != ([float(n) for n in expected_numbers], expected_times):
            wrong.append(f"{key}: {definition} says {got}")
    assert wrong == []


DEPTH_CHECKS = [key for key in CONSTRAINTS if key[1].endswith("_depth_check")]


def test_the_depth_in_the_checks_is_the_python_bound(database_url: str) -> None:
    # Each JSON column's jsonpath finds an array or object MAX_JSON_DEPTH levels below the
    # top: the first one past the bound.
    found = definitions(database_url)
    path = (
        f"'strict $.**{{{bounds.MAX_JSON_DEPTH}}}"
        '?(@.type() == "array" || @.type() == "object")\'::jsonpath'
    )
    columns = {
        "jobs_json_depth_check": ["payload", "progress", "result", "errors"],
        "job_steps_result_depth_check": ["result"],
        "job_signals_payload_depth_check": ["payload"],
        "schedules_payload_depth_check": ["payload"],
    }
    for key in DEPTH_CHECKS:
        definition = found[key]
        assert definition.count(path) == len(columns[key[1]]), definition
        assert [c for c in columns[key[1]] if f"jsonb_path_exists({c}, {path})" in definition] == (
            columns[key[1]]
        ), definition


def nested(depth: int) -> str:
    """JSON text of an object holding `depth` arrays and objects in all, one in another."""
    return '{"a": ' + "[" * (depth - 1) + "1" + "]" * (depth - 1) + "}"


def test_the_api_refuses_what_the_depth_checks_refuse() -> None:
    json_text.json_object(json.loads(nested(bounds.MAX_JSON_DEPTH)), "payload")
    with pytest.raises(InvalidJob, match="nested too deeply"):
        json_text.json_object(json.loads(nested(bounds.MAX_JSON_DEPTH + 1)), "payload")
    with pytest.raises(InvalidJob, match="nested too deeply"):
        json_text.json_value(json.loads(nested(bounds.MAX_JSON_DEPTH + 1)), "result")


def test_the_number_parser_reads_each_kind_of_literal() -> None:
    definition = (
        "CHECK (((x >= (0)::double precision) AND (x <= ('3153600000'::bigint)::double"
        " precision) AND (y ~ '^[0-9]{2}$'::text) AND (z <= 2097152) AND"
        " (t <= '9999-12-30 00:00:00+00'::timestamp with time zone)))"
    )

    assert numbers_in(definition) == [0.0, 3153600000.0, 2097152.0]
    assert times_in(definition) == [LATEST]


def test_the_application_guards_read_times_in_the_same_range(database_url: str) -> None:
    # tickq.readable_time (jobs_app_admit, jobs_app_guard) and the checks: one range.
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "select prosrc from pg_proc where proname = 'readable_time'"
            " and pronamespace = 'tickq'::regnamespace"
        ).fetchone()
    assert row is not None
    quoted = re.findall(r"'([^']*)'", row[0])
    assert [datetime.fromisoformat(t) for t in quoted] == [EARLIEST, LATEST]


def test_the_backoff_bounds_are_the_backoff_rules() -> None:
    # backoff.Backoff writes its numbers in its checks: the bounds are exactly its edges.
    Backoff(
        base=bounds.MAX_BACKOFF_BASE,
        factor=bounds.MAX_BACKOFF_FACTOR,
        max=bounds.MAX_BACKOFF_MAX,
        jitter=1.0,
    )
    Backoff(
        base=bounds.MAX_BACKOFF_BASE, factor=bounds.MIN_BACKOFF_FACTOR, max=bounds.MAX_BACKOFF_BASE
    )
    outside = [
        {"base": math.nextafter(bounds.MAX_BACKOFF_BASE, math.inf), "max": bounds.MAX_BACKOFF_MAX},
        {"factor": math.nextafter(bounds.MAX_BACKOFF_FACTOR, math.inf)},
        {"factor": math.nextafter(bounds.MIN_BACKOFF_FACTOR, 0)},
        {"max": math.nextafter(bounds.MAX_BACKOFF_MAX, math.inf)},
        {"base": 10.0, "max": math.nextafter(10.0, 0)},
        {"jitter": math.nextafter(1.0, math.inf)},
        {"base": 0.0},
    ]
    for fields in outside:
        with pytest.raises(ValueError):
            Backoff(**fields)


def test_the_attempts_bound_leaves_room_for_what_the_engine_adds() -> None:
    # A saga's compensation leaves attempts + MAX_STEPS * UNDO_TRIES + 1; a snooze adds 1.
    assert bounds.MAX_ATTEMPTS >= 100 * validation.MAX_ATTEMPTS_LIMIT
    assert bounds.MAX_ATTEMPTS + MAX_STEPS * UNDO_TRIES + 1 <= validation.INT32


# -- tickq.jobs's constraints are on every partition -------------------------------------


def test_every_partition_of_the_jobs_holds_their_bounds(conn: psycopg.Connection) -> None:
    # A day partition made now, long after the constraints were added, takes them too.
    made = conn.execute("select tickq.jobs_partitions_ensure(date '2031-03-01', 0)").fetchone()
    assert made == (1,)

    rows = conn.execute(
        "select c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)"
        " from pg_constraint c"
        " join pg_partition_tree('tickq.jobs') p on p.relid = c.conrelid"
        " where c.contype = 'c' and c.conname like 'jobs\\_%'"
    ).fetchall()
    partitions = {
        r[0] for r in conn.execute("select relid::text from pg_partition_tree('tickq.jobs')")
    }
    by_partition: dict[str, dict[str, str]] = {}
    for table, name, definition in rows:
        by_partition.setdefault(table, {})[name] = definition

    parent = by_partition["tickq.jobs"]
    assert {name for _, name in CONSTRAINTS if name.startswith("jobs_")} <= set(parent)
    assert {
        "tickq.jobs_live",
        "tickq.jobs_done",
        "tickq.jobs_done_default",
        "tickq.jobs_done_20310301",
    } <= partitions
    for partition in partitions:
        held = by_partition.get(partition, {})
        assert {n: d for n, d in held.items() if n in parent} == parent, partition

    # And they hold there: a finished job's row lands in its day's partition, or the default.
    for finished_at in ("2031-03-01 12:00:00+00", "2045-01-01 00:00:00+00"):
        with pytest.raises(psycopg.errors.CheckViolation) as refused:
            conn.execute(
                "insert into tickq.jobs (type, status, finished_at, backoff_base, backoff_max)"
                " values ('bounds', 'succeeded', %s, 1e300, 1e300)",
                (finished_at,),
            )
        assert refused.value.diag.constraint_name == "jobs_backoff_check"


# -- Every bound refuses a value just outside it, as every role ---------------------------


def ints_json(limit: int, *, wrap: str = "object") -> str:
    """The JSON text of the largest kind of value as jsonb (an array of zeros, 12 bytes an
    element against 2 of text), as long as `limit` bytes allow, in an object or bare."""
    if wrap == "object":
        count = (limit - len('{"a":[]}') + 1) // 2
        text = '{"a":[' + ",".join(["0"] * count) + "]}"
    else:
        count = (limit - len("[]") + 1) // 2
        text = "[" + ",".join(["0"] * count) + "]"
    assert len(text) <= limit
    return text


def string_json(stored: int) -> str:
    """An object whose jsonb is just over `stored` bytes."""
    return json.dumps({"a": "x" * stored})


def full_error_history() -> str:
    """ERROR_HISTORY entries of the longest storable error, in 4-byte characters."""
    entries = [
        {"attempt": i + 1, "at": "2026-01-01T00:00:00.000000+00:00", "error": "😀" * 4000}
        for i in range(bounds.ERROR_HISTORY)
    ]
    return json.dumps(entries, ensure_ascii=False)


@dataclass(frozen=True)
class Case:
    """Values of some columns that break `constraint`, and values just inside it."""

    table: str
    constraint: str
    bad: Sequence[Mapping[str, Any]]
    good: Sequence[Mapping[str, Any]]
    # The application role may insert these columns and its policies let the row through.
    app: bool = False


def _job_cases() -> list[Case]:
    t = "tickq.jobs"
    api_payload = ints_json(json_text.MAX_PAYLOAD_BYTES)
    api_result = ints_json(validation.MAX_RESULT_BYTES, wrap="array")
    # The API takes these: the stored bounds must too.
    json_text.json_object(json.loads(api_payload), "payload")
    json_text.json_value(json.loads(api_result), "result", validation.MAX_RESULT_BYTES)
    running = {"status": "running", "lease_token": uuid4()}
    nxt = math.nextafter
    cases = [
        Case(
            t,
            "jobs_max_attempts_check",
            [{"max_attempts": bounds.MAX_ATTEMPTS + 1}, {"max_attempts": 0}],
            [{"max_attempts": bounds.MAX_ATTEMPTS}, {"max_attempts": 1}],
            app=True,
        ),
        Case(
            t,
            "jobs_lease_seconds_check",
            [
                {"lease_seconds": bounds.MAX_LEASE_SECONDS + 1},
                {"lease_seconds": 2**31 - 1},
                {"lease_seconds": 0},
            ],
            [{"lease_seconds": bounds.MAX_LEASE_SECONDS}, {"lease_seconds": 1}],
            app=True,
        ),
        Case(
            t,
            "jobs_backoff_check",
            [
                {"backoff_base": 1e300, "backoff_max": 1e300},
                {
                    "backoff_base": nxt(bounds.MAX_BACKOFF_BASE, math.inf),
                    "backoff_max": bounds.MAX_BACKOFF_MAX,
                },
                {"backoff_base": math.nan, "backoff_max": math.nan},
                {"backoff_factor": nxt(bounds.MAX_BACKOFF_FACTOR, math.inf)},
                {"backoff_factor": math.inf},
                {"backoff_factor": nxt(bounds.MIN_BACKOFF_FACTOR, 0)},
                {"backoff_max": nxt(bounds.MAX_BACKOFF_MAX, math.inf)},
                {"backoff_base": 10.0, "backoff_max": nxt(10.0, 0)},
                {"backoff_jitter": nxt(1.0, math.inf)},
            ],
            [
                {"backoff_base": bounds.MAX_BACKOFF_BASE, "backoff_max": bounds.MAX_BACKOFF_BASE},
                {"backoff_factor": bounds.MAX_BACKOFF_FACTOR, "backoff_jitter": 1.0},
                {"backoff_factor": bounds.MIN_BACKOFF_FACTOR, "backoff_jitter": 0.0},
                {"backoff_base": 10.0, "backoff_max": bounds.MAX_BACKOFF_MAX},
            ],
            app=True,
        ),
        Case(t, "jobs_resumes_check", [{"resumes": -1}], [{"resumes": 0}]),
        Case(
            t,
            "jobs_names_check",
            [
                {"type": "t" * (bounds.MAX_NAME + 1)},
                {"queue": "q" * (bounds.MAX_NAME + 1)},
                {"idempotency_key": "k" * (bounds.MAX_KEY + 1)},
            ],
            [
                {"type": "t" * bounds.MAX_NAME},
                {"queue": "q" * bounds.MAX_NAME},
                {"idempotency_key": "k" * bounds.MAX_KEY},
            ],
            app=True,
        ),
        Case(
            t,
            "jobs_names_check",
            [{"wait_name": "w" * (bounds.MAX_NAME + 1)}],
            [{"wait_name": "😀" * bounds.MAX_NAME}],
        ),
        Case(
            t,
            "jobs_error_check",
            [
                {"error": "x" * (bounds.MAX_ERROR_BYTES + 1)},
                {"error": "é" * (bounds.MAX_ERROR_BYTES // 2 + 1)},
            ],
            # The longest error transitions.storable_error keeps, in 4-byte characters.
            [{"error": "😀" * (bounds.MAX_ERROR_BYTES // 4)}],
        ),
        Case(
            t,
            "jobs_signals_check",
            [
                {"signals": [f"s{i}" for i in range(bounds.MAX_SIGNALS + 1)]},
                {"signals": ["x" * 30_000, "y" * 30_000]},
            ],
            [{"signals": ["😀" * bounds.MAX_NAME] * bounds.MAX_SIGNALS}],
        ),
        Case(
            t,
            "jobs_payload_size_check",
            [{"payload": string_json(bounds.MAX_PAYLOAD_STORED)}],
            [{"payload": api_payload}],
            app=True,
        ),
        Case(
            t,
            "jobs_result_size_check",
            [{"result": string_json(bounds.MAX_RESULT_STORED)}],
            [{"result": api_result}],
        ),
        Case(
            t,
            "jobs_progress_size_check",
            [{"progress": string_json(bounds.MAX_PROGRESS_STORED)}],
            [{"progress": api_payload}],
        ),
        Case(
            t,
            "jobs_errors_check",
            [{"errors": "{}"}, {"errors": json.dumps([string_json(bounds.MAX_ERRORS_STORED)])}],
            [{"errors": full_error_history()}],
        ),
        Case(
            t,
            "jobs_json_depth_check",
            [{"payload": nested(bounds.MAX_JSON_DEPTH + 1)}],
            [{"payload": nested(bounds.MAX_JSON_DEPTH)}],
            app=True,
        ),
        Case(
            t,
            "jobs_json_depth_check",
            [
                {"progress": nested(bounds.MAX_JSON_DEPTH + 1)},
                {"result": nested(bounds.MAX_JSON_DEPTH + 1)},
                {"errors": "[" + nested(bounds.MAX_JSON_DEPTH + 1) + "]"},
            ],
            [
                {"progress": nested(bounds.MAX_JSON_DEPTH)},
                {"result": nested(bounds.MAX_JSON_DEPTH)},
                {"errors": "[" + nested(bounds.MAX_JSON_DEPTH - 1) + "]"},
            ],
        ),
    ]
    for column in (
        "run_after",
        "created_at",
        "updated_at",
        "started_at",
        "finished_at",
        "wait_until",
        "lease_until",
    ):
        extra = running if column == "lease_until" else {}
        cases.append(
            Case(
                t,
                "jobs_times_check",
                [{**extra, column: at} for at in OUT_OF_RANGE_TIMES],
                [{**extra, column: at} for at in BOTH_TIMES],
                app=column in ("run_after", "created_at", "updated_at"),
            )
        )
    return cases


def _side_cases() -> list[Case]:
    api_step = ints_json(bounds.MAX_STEP_BYTES, wrap="array")
    api_signal = ints_json(bounds.MAX_SIGNAL_BYTES, wrap="array")
    name, key = bounds.MAX_NAME, bounds.MAX_KEY
    cases = [
        Case(
            "tickq.job_steps",
            "job_steps_name_check",
            [{"name": "n" * (name + 1)}, {"name": ""}],
            [{"name": "😀" * name}],
        ),
        Case(
            "tickq.job_steps",
            "job_steps_result_size_check",
            [{"result": string_json(bounds.MAX_STEP_RESULT_STORED)}],
            [{"result": api_step}],
        ),
        Case(
            "tickq.job_steps",
            "job_steps_result_depth_check",
            [{"result": nested(bounds.MAX_JSON_DEPTH + 1)}],
            [{"result": nested(bounds.MAX_JSON_DEPTH)}],
        ),
        Case(
            "tickq.job_signals",
            "job_signals_payload_depth_check",
            [{"payload": nested(bounds.MAX_JSON_DEPTH + 1)}],
            [{"payload": nested(bounds.MAX_JSON_DEPTH)}],
            app=True,
        ),
        Case(
            "tickq.schedules",
            "schedules_payload_depth_check",
            [{"payload": nested(bounds.MAX_JSON_DEPTH + 1)}],
            [{"payload": nested(bounds.MAX_JSON_DEPTH)}],
        ),
        Case(
            "tickq.job_steps",
            "job_steps_size_check",
            [{"size": -1}, {"size": bounds.MAX_STEP_BYTES + 1}],
            [{"size": 0}, {"size": bounds.MAX_STEP_BYTES}],
        ),
        Case(
            "tickq.job_signals",
            "job_signals_name_check",
            [{"name": "n" * (name + 1)}],
            [{"name": "😀" * name}],
            app=True,
        ),
        Case(
            "tickq.job_signals",
            "job_signals_payload_size_check",
            [{"payload": string_json(bounds.MAX_SIGNAL_PAYLOAD_STORED)}],
            [{"payload": api_signal}],
            app=True,
        ),
        Case(
            "tickq.job_signals",
            "job_signals_size_check",
            [{"size": -1}, {"size": bounds.MAX_SIGNAL_BYTES + 1}],
            [{"size": 0}, {"size": bounds.MAX_SIGNAL_BYTES}],
            app=True,
        ),
        Case(
            "tickq.job_step_tries",
            "job_step_tries_name_check",
            [{"name": "n" * (name + 1)}],
            [{"name": "😀" * name}],
        ),
        Case(
            "tickq.job_step_tries",
            "job_step_tries_error_check",
            [{"error": "x" * (bounds.MAX_ERROR_BYTES + 1)}],
            [{"error": "😀" * (bounds.MAX_ERROR_BYTES // 4)}],
        ),
        Case(
            "tickq.job_step_tries",
            "job_step_tries_times_check",
            [{"done_at": at} for at in OUT_OF_RANGE_TIMES],
            [{"done_at": at} for at in BOTH_TIMES],
        ),
        Case(
            "tickq.job_children",
            "job_children_step_check",
            [{"step": "s" * (name + 1)}],
            [{"step": "😀" * name}],
        ),
        Case(
            "tickq.job_gates",
            "job_gates_key_check",
            [{"gate_key": "g" * (key + 1)}],
            [{"gate_key": "😀" * key}],
        ),
        Case(
            "tickq.schedules",
            "schedules_max_attempts_check",
            [{"max_attempts": bounds.MAX_ATTEMPTS + 1}, {"max_attempts": 0}],
            [{"max_attempts": bounds.MAX_ATTEMPTS}],
        ),
        Case(
            "tickq.schedules",
            "schedules_payload_size_check",
            [{"payload": string_json(bounds.MAX_PAYLOAD_STORED)}],
            [{"payload": ints_json(json_text.MAX_PAYLOAD_BYTES)}],
        ),
        Case(
            "tickq.schedules",
            "schedules_names_check",
            [
                {"type": "t" * (name + 1)},
                {"queue": "q" * (name + 1)},
                {"group_key": "g" * (name + 1)},
            ],
            [{"type": "t" * name, "queue": "q" * name, "group_key": "g" * name}],
        ),
        Case(
            "tickq.type_limits",
            "type_limits_rate_check",
            [
                {"rate_limit": bounds.MAX_RATE + 1},
                {"rate_period_seconds": math.nextafter(bounds.MAX_PERIOD_SECONDS, math.inf)},
                {"rate_period_seconds": 1e300},
                {"rate_period_seconds": math.nan},
            ],
            [{"rate_limit": bounds.MAX_RATE, "rate_period_seconds": bounds.MAX_PERIOD_SECONDS}],
        ),
        Case(
            "tickq.retention_policies",
            "retention_policies_max_age_check",
            [
                {"max_age_seconds": math.nextafter(bounds.MAX_AGE_SECONDS, math.inf)},
                {"max_age_seconds": 1e300},
                {"max_age_seconds": math.inf},
            ],
            [{"max_age_seconds": bounds.MAX_AGE_SECONDS}],
        ),
        Case(
            "tickq.queue_pauses",
            "queue_pauses_paused_by_check",
            [{"paused_by": "p" * (bounds.MAX_PAUSED_BY + 1)}],
            [{"paused_by": "😀" * bounds.MAX_PAUSED_BY}],
        ),
        Case(
            "tickq.outbox",
            "outbox_last_error_check",
            [{"last_error": "x" * (bounds.MAX_ERROR_BYTES + 1)}],
            [{"last_error": "😀" * (bounds.MAX_ERROR_BYTES // 4)}],
        ),
    ]
    times = [
        ("tickq.job_steps", "job_steps_finished_at_check", "finished_at", False),
        ("tickq.job_signals", "job_signals_sent_at_check", "sent_at", True),
        # The application role's one row here (a compensation's) is free only in `at`.
        ("tickq.job_step_tries", "job_step_tries_times_check", "at", True),
        ("tickq.job_gates", "job_gates_first_at_check", "first_at", False),
        ("tickq.schedules", "schedules_times_check", "next_at", False),
        ("tickq.schedules", "schedules_times_check", "last_fired", False),
        ("tickq.schedules", "schedules_times_check", "created_at", False),
        ("tickq.schedules", "schedules_times_check", "updated_at", False),
        ("tickq.queue_pauses", "queue_pauses_paused_at_check", "paused_at", False),
        ("tickq.outbox", "outbox_times_check", "created_at", False),
        ("tickq.outbox", "outbox_times_check", "published_at", False),
    ]
    for table, constraint, column, app in times:
        cases.append(
            Case(
                table,
                constraint,
                [{column: at} for at in OUT_OF_RANGE_TIMES],
                [{column: at} for at in BOTH_TIMES],
                app=app,
            )
        )
    return cases


def base_row(table: str, *, job_id: UUID, user: UUID | None) -> dict[str, Any]:
    """A row of `table` inside every bound; as the application user `user` when given."""
    now = datetime.now(UTC)
    rows: dict[str, dict[str, Any]] = {
        "tickq.jobs": {"type": "bounds", "queue": "bounds", "user_id": user, "status": "queued"},
        "tickq.job_steps": {"job_id": job_id, "name": "step", "size": 0, "finished_at": now},
        "tickq.job_signals": {"job_id": job_id, "name": "signal", "size": 0, "sent_at": now},
        "tickq.job_step_tries": (
            {
                "job_id": job_id,
                "kind": "compensation",
                "name": "cancelled",
                "tries": 0,
                "error": "cancelled",
                "at": now,
            }
            if user is not None
            else {"job_id": job_id, "kind": "step", "name": "step", "tries": 1, "at": now}
        ),
        "tickq.job_children": {
            "parent_id": job_id,
            "step": "map",
            "idx": 0,
            "child_id": uuid4(),
            "max_running": 1,
            "siblings": 1,
        },
        "tickq.job_gates": {
            "job_id": job_id,
            "kind": "debounce",
            "gate_key": "key",
            "first_at": now,
        },
        "tickq.schedules": {
            "name": "bounds",
            "cron": "* * * * *",
            "type": "bounds",
            "next_at": now,
        },
        "tickq.type_limits": {"type": "bounds", "rate_limit": 1, "rate_period_seconds": 1.0},
        "tickq.retention_policies": {"queue": "bounds", "max_age_seconds": 1.0},
        "tickq.queue_pauses": {"queue": "bounds", "paused_by": "me"},
        "tickq.outbox": {"detail_type": "Bounds", "detail": "{}"},
    }
    return rows[table]


ColumnTypes = dict[str, dict[str, str]]


def column_types(conn: psycopg.Connection) -> ColumnTypes:
    rows = conn.execute(
        "select c.oid::regclass::text, a.attname, format_type(a.atttypid, a.atttypmod)"
        " from pg_attribute a join pg_class c on c.oid = a.attrelid"
        " where c.relnamespace = 'tickq'::regnamespace and c.relkind in ('r', 'p')"
        " and a.attnum > 0 and not a.attisdropped"
    ).fetchall()
    types: ColumnTypes = {}
    for table, column, type_ in rows:
        types.setdefault(table, {})[column] = type_
    return types


def _values(types: Mapping[str, str], row: Mapping[str, Any]) -> sql.Composed:
    return sql.SQL(", ").join(
        sql.SQL("{}::{}").format(sql.Placeholder(), sql.SQL(types[c])) for c in row
    )


def insert(
    types: ColumnTypes, table: str, row: Mapping[str, Any]
) -> tuple[sql.Composed, list[Any]]:
    schema, name = table.split(".")
    statement = sql.SQL("insert into {} ({}) values ({})").format(
        sql.Identifier(schema, name),
        sql.SQL(", ").join(sql.Identifier(c) for c in row),
        _values(types[table], row),
    )
    return statement, list(row.values())


def update(
    types: ColumnTypes, table: str, row: Mapping[str, Any]
) -> tuple[sql.Composed, list[Any]]:
    schema, name = table.split(".")
    statement = sql.SQL("update {} set {}").format(
        sql.Identifier(schema, name),
        sql.SQL(", ").join(
            sql.SQL("{} = {}::{}").format(
                sql.Identifier(c), sql.Placeholder(), sql.SQL(types[table][c])
            )
            for c in row
        ),
    )
    return statement, list(row.values())


Statement = tuple[sql.SQL | sql.Composed, Sequence[Any]]


def attempt(conn: psycopg.Connection, statements: Sequence[Statement]) -> psycopg.Error | None:
    """Run the statements in a transaction that is rolled back; the error they raised."""
    try:
        with conn.transaction(force_rollback=True):
            for statement, params in statements:
                conn.execute(statement, params)
    except psycopg.Error as exc:
        return exc
    return None


def as_user(user: UUID | None) -> list[Statement]:
    if user is None:
        return []
    return [(sql.SQL("select set_config('tickq.user_id', %s, true)"), [str(user)])]


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def check_cases(
    conn: psycopg.Connection,
    types: ColumnTypes,
    cases: Sequence[Case],
    *,
    job_id: UUID,
    user: UUID | None = None,
    updates: bool = True,
) -> list[str]:
    """Each bad value refused by its constraint and each good one taken, on insert (and on
    update of a row inside the bounds); what went otherwise."""
    wrong: list[str] = []
    for case in cases:
        base = base_row(case.table, job_id=job_id, user=user)
        for values, ok in [*((v, False) for v in case.bad), *((v, True) for v in case.good)]:
            row = {**base, **values}
            tries = {"insert": [*as_user(user), insert(types, case.table, row)]}
            if updates:
                tries["update"] = [
                    *as_user(user),
                    insert(types, case.table, base),
                    update(types, case.table, values),
                ]
            for how, statements in tries.items():
                error = attempt(conn, statements)
                what = f"{case.table} {how} {short(dict(values))}"
                if ok and error is not None:
                    wrong.append(f"{what}: refused ({error.sqlstate}: {error})")
                elif not ok and (
                    error is None
                    or error.sqlstate != CHECK_VIOLATION
                    or error.diag.constraint_name != case.constraint
                ):
                    said = (
                        "taken"
                        if error is None
                        else f"{error.sqlstate} {error.diag.constraint_name}"
                    )
                    wrong.append(f"{what}: {said}, not {case.constraint}")
    return wrong


JOB_CASES = _job_cases()
SIDE_CASES = _side_cases()


@pytest.fixture
def types(conn: psycopg.Connection) -> ColumnTypes:
    return column_types(conn)


def test_the_owner_is_held_to_every_bound(conn: psycopg.Connection, types: ColumnTypes) -> None:
    # The connection the tests migrate with: the tables' owner, a superuser here.
    job_id = uuid4()

    wrong = check_cases(conn, types, [*JOB_CASES, *SIDE_CASES], job_id=job_id)

    assert wrong == []


@pytest.fixture
def worker(worker_login_url: str, conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    """A connection of a worker's login (conn: the tables emptied first)."""
    factory = connection_factory(worker_login_url)
    yield next(factory)()
    next(factory, None)


@pytest.fixture
def app(app_login_url: str, conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    """A connection of an application's login (row-level security applies)."""
    factory = connection_factory(app_login_url)
    yield next(factory)()
    next(factory, None)


def test_a_worker_is_held_to_every_bound(worker: psycopg.Connection, types: ColumnTypes) -> None:
    # job_gates is written by the owner's functions alone: a worker may only read it.
    writable = [c for c in [*JOB_CASES, *SIDE_CASES] if c.table != "tickq.job_gates"]

    wrong = check_cases(worker, types, writable, job_id=uuid4())

    assert wrong == []
    gate = base_row("tickq.job_gates", job_id=uuid4(), user=None)
    refused = attempt(worker, [insert(types, "tickq.job_gates", gate)])
    assert refused is not None and refused.sqlstate == "42501"


def own_job(conn: psycopg.Connection, user: UUID) -> UUID:
    """A queued job of `user`, written by the owner."""
    row = conn.execute(
        "insert into tickq.jobs (type, queue, user_id) values ('bounds', 'bounds', %s)"
        " returning id",
        (user,),
    ).fetchone()
    assert row is not None
    return UUID(str(row[0]))


def test_an_application_user_writes_no_table_directly(conn: psycopg.Connection) -> None:
    # Its writes go through tickq's functions alone (tests/security/test_app_write_surface.py
    # holds them to the bounds); no table of the schema takes an insert, update or delete.
    writable = conn.execute(
        "select c.relname, p.kind from pg_class c"
        " join pg_namespace n on n.oid = c.relnamespace"
        " cross join (values ('INSERT'), ('UPDATE'), ('DELETE')) as p (kind)"
        " where n.nspname = 'tickq' and c.relkind in ('r', 'p')"
        "   and (has_table_privilege('tickq_app', c.oid, p.kind)"
        "        or (p.kind <> 'DELETE'"
        "            and has_any_column_privilege('tickq_app', c.oid, p.kind)))"
    ).fetchall()
    assert writable == []


def test_an_application_users_updates_outside_a_bound_are_refused(
    app: psycopg.Connection, conn: psycopg.Connection, types: ColumnTypes
) -> None:
    # Its updates meet its grants and the guard before the checks: all refused, by one of them.
    user = uuid4()
    own_job(conn, user)
    taken = []
    for case in JOB_CASES:
        for values in case.bad:
            error = attempt(app, [*as_user(user), update(types, "tickq.jobs", values)])
            if error is None or error.sqlstate not in (CHECK_VIOLATION, "42501", "TQ422"):
                taken.append(f"{short(dict(values))}: {error}")
    assert taken == []


def test_a_signal_name_is_bounded_on_the_applications_way_in(
    app: psycopg.Connection, conn: psycopg.Connection
) -> None:
    # Delivering a signal appends one name to the job's own row: tickq.signal bounds the
    # name (the check bounds the names' bytes too, for every role).
    user = uuid4()
    job_id = own_job(conn, user)
    send = "select tickq.signal(%s, %s)"

    refused = attempt(app, [*as_user(user), (sql.SQL(send), [job_id, "x" * 60_000])])
    taken = attempt(app, [*as_user(user), (sql.SQL(send), [job_id, "😀" * bounds.MAX_NAME])])

    assert refused is not None
    assert (refused.sqlstate, refused.diag.column_name) == ("22023", "name")
    assert taken is None


@pytest.mark.parametrize("role", ["app", "worker"])
def test_a_value_that_compresses_well_is_measured_as_it_is(
    role: str, app: psycopg.Connection, worker: psycopg.Connection, conn: psycopg.Connection
) -> None:
    # A value copied from a table that stores it compressed would pass a check of its stored
    # size: 20 MB of one letter is about 230 kB there.
    user = uuid4() if role == "app" else None
    job_id = own_job(conn, user) if user else uuid4()
    other = app if role == "app" else worker
    other.execute(
        "create temporary table big as select jsonb_build_object('a', repeat('x', 20000000)) as v"
    )
    stored = other.execute("select pg_column_size(v) from big").fetchone()
    assert stored is not None and stored[0] < bounds.MAX_PAYLOAD_STORED

    if role == "app":  # through its functions, which measure the value as text
        enqueue_sql = (
            "select * from tickq.enqueue_many("
            " (select jsonb_build_array(jsonb_build_object('type', 'bounds', 'payload', v))"
            "  from big)) where %s::uuid is not null"
        )
        signal_sql = "select tickq.signal(%s, 'big', (select v from big))"
    else:
        enqueue_sql = (
            "insert into tickq.jobs (type, queue, user_id, payload)"
            " select 'bounds', 'bounds', %s, v from big"
        )
        signal_sql = (
            "insert into tickq.job_signals (job_id, name, payload, size, sent_at)"
            " select %s, 'big', v, 0, now() from big"
        )
    enqueue = attempt(other, [*as_user(user), (sql.SQL(enqueue_sql), [user or uuid4()])])
    signal = attempt(other, [*as_user(user), (sql.SQL(signal_sql), [job_id])])

    if role == "app":
        assert enqueue is not None and enqueue.diag.column_name == "payload"
        assert signal is not None and signal.diag.column_name == "payload"
    else:
        assert enqueue is not None
        assert enqueue.diag.constraint_name == "jobs_payload_size_check"
        assert signal is not None
        assert signal.diag.constraint_name == "job_signals_payload_size_check"
    if role == "worker":
        conn.execute("insert into tickq.jobs (id, type) values (%s, 'bounds')", (job_id,))
        result = attempt(
            other,
            [
                (
                    sql.SQL("update tickq.jobs set result = (select v from big) where id = %s"),
                    [job_id],
                )
            ],
        )
        assert result is not None and result.diag.constraint_name == "jobs_result_size_check"
