"""The bounds every row of tickq's tables holds, whoever writes it.

The API refuses values outside what the engine can run before anything is written
(validation.py and the modules of each table). But a row can also come from plain SQL,
written by any role that may insert or update it (the application role, a worker, the
tables' owner), and a value the engine cannot read there stops the queue for everyone: a
backoff of 1e300 seconds fails every later reclaim with `interval out of range`, a lease
of 2^31 seconds holds a running slot for decades, a `-infinity` time breaks the claim and
every listing (a Python datetime cannot hold it), a 100 MB payload blows a worker's
memory. So the tables hold these bounds themselves, as CHECK constraints, which bind every
role, the owner included (queue_core/schema/tables.sql; added to existing databases by
migration 0031_column_bounds, which first brings rows that break them inside).

Each bound is at least what the API accepts, so nothing the API lets in is ever refused,
and they are named here once, from the API's own constants where it has them;
tests/integration/test_column_bounds.py reads the numbers back out of the constraints'
definitions and fails when either side changes alone.
"""

from __future__ import annotations

from typing import Final

from queue_core.model.jobs import ERROR_HISTORY
from queue_core.model.json_text import MAX_JSON_DEPTH, MAX_PAYLOAD_BYTES
from queue_core.model.steps import MAX_SIGNAL_BYTES, MAX_SIGNALS, MAX_STEP_BYTES
from queue_core.model.transitions import MAX_ERROR
from queue_core.model.validation import (
    EARLIEST_TIME,
    LATEST_TIME,
    MAX_KEY,
    MAX_LEASE_SECONDS,
    MAX_NAME,
    MAX_RESULT_BYTES,
)
from queue_core.policies.limits import MAX_PERIOD_SECONDS, MAX_RATE
from queue_core.policies.outbox import _MAX_DETAIL_BYTES
from queue_core.policies.pauses import MAX_PAUSED_BY, MAX_REASON
from queue_core.policies.retention import MAX_AGE_SECONDS

__all__ = [
    "EARLIEST",
    "ERROR_HISTORY",
    "JSONB_PER_TEXT_BYTE",
    "LATEST",
    "MAX_AGE_SECONDS",
    "MAX_ATTEMPTS",
    "MAX_BACKOFF_BASE",
    "MAX_BACKOFF_FACTOR",
    "MAX_BACKOFF_MAX",
    "MAX_ERRORS_STORED",
    "MAX_ERROR_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_KEY",
    "MAX_LEASE_SECONDS",
    "MAX_NAME",
    "MAX_OUTBOX_DETAIL_BYTES",
    "MAX_PAUSED_BY",
    "MAX_PAYLOAD_STORED",
    "MAX_PERIOD_SECONDS",
    "MAX_PROGRESS_STORED",
    "MAX_RATE",
    "MAX_REASON",
    "MAX_RESULT_STORED",
    "MAX_SIGNALS",
    "MAX_SIGNAL_BYTES",
    "MAX_SIGNAL_NAMES_BYTES",
    "MAX_SIGNAL_PAYLOAD_STORED",
    "MAX_STEP_BYTES",
    "MAX_STEP_RESULT_STORED",
    "MIN_BACKOFF_FACTOR",
    "UTF8_MAX_BYTES",
]

# Times: finite, and inside the years 1-9999 a Python datetime holds in any time zone, with
# a day of margin each side (a time of 0001-01-01 00:00 UTC is year 0 west of Greenwich).
# The same range as tickq.readable_time, which the application role's triggers test.
EARLIEST: Final = EARLIEST_TIME
LATEST: Final = LATEST_TIME

# Backoff (tickq.jobs.backoff_*): the rules of backoff.Backoff, which refuses a policy
# outside them (backoff.py writes these numbers in its checks; the test holds it to them).
# The jitter is a fraction in [0, 1]; the base is above 0.
MAX_BACKOFF_BASE: Final = 86_400.0
MIN_BACKOFF_FACTOR: Final = 1.0
MAX_BACKOFF_FACTOR: Final = 100.0
MAX_BACKOFF_MAX: Final = 7 * 86_400.0

# max_attempts: the API takes up to validation.MAX_ATTEMPTS_LIMIT (1000), but the engine
# raises it past that itself: a saga that begins its compensation away from its handler is
# left attempts + MAX_STEPS * UNDO_TRIES + 1 (50,001 for a job with 10,000 undoable steps;
# tickq.job_compensation_spare). A snooze raises nothing: it gives its attempt back off
# attempts and counts itself in snoozes. So the bound is no small multiple of 1000 but
# 10^9, and the engine's own sums on a row inside it (attempts + the compensation's spare)
# stay inside a 32-bit integer.
MAX_ATTEMPTS: Final = 1_000_000_000

# Text: names (type, queue, step and signal names, a wait's name) are MAX_NAME characters
# and keys MAX_KEY, as the API takes them. Error text is bounded in bytes (octet_length
# reads the stored length without detoasting it): transitions.storable_error keeps at most
# MAX_ERROR characters, of at most UTF8_MAX_BYTES bytes each.
UTF8_MAX_BYTES: Final = 4
MAX_ERROR_BYTES: Final = MAX_ERROR * UTF8_MAX_BYTES

# A job's signals (tickq.jobs.signals): at most MAX_SIGNALS names of at most MAX_NAME
# characters each.
MAX_SIGNAL_NAMES_BYTES: Final = MAX_SIGNALS * MAX_NAME * UTF8_MAX_BYTES

# JSON values are bounded by their stored (jsonb) size, which the API does not see: it
# bounds the JSON text. jsonb can be several times its text: an array of small integers
# takes 12 bytes an element against 2 of text ("0,"), 6 times (measured on PostgreSQL 15:
# 256 KiB of such text is 1.5 MiB of jsonb); nested empty arrays 2.7 times, strings and
# objects less. So each stored bound is 8 times the API's bound of the text, which nothing
# the API accepts exceeds.
JSONB_PER_TEXT_BYTE: Final = 8
MAX_PAYLOAD_STORED: Final = JSONB_PER_TEXT_BYTE * MAX_PAYLOAD_BYTES  # 2 MiB
MAX_RESULT_STORED: Final = JSONB_PER_TEXT_BYTE * MAX_RESULT_BYTES  # 8 MiB
# Progress is checked against the payload's bound (postgres/leases.py).
MAX_PROGRESS_STORED: Final = JSONB_PER_TEXT_BYTE * MAX_PAYLOAD_BYTES  # 2 MiB
# The error history keeps ERROR_HISTORY entries of at most MAX_ERROR_BYTES of error text
# each, with their attempt and time: about 330 kB at most.
MAX_ERRORS_STORED: Final = 1024 * 1024
MAX_STEP_RESULT_STORED: Final = JSONB_PER_TEXT_BYTE * MAX_STEP_BYTES  # 2 MiB
MAX_SIGNAL_PAYLOAD_STORED: Final = JSONB_PER_TEXT_BYTE * MAX_SIGNAL_BYTES  # 512 KiB

# JSON values nest at most MAX_JSON_DEPTH arrays and objects (validation.py), which a worker
# reads back with Python's json module; the tables hold it for the values a worker reads
# (tickq.jobs's payload, progress, result and errors, a step's result, a signal's payload,
# a schedule's payload) with a jsonpath that finds an array or object at that level below
# the top. A number is not bounded: jsonb prints one of any size in all its digits, where
# Python reads an integer of at most 4300 (sys.get_int_max_str_digits), but a check that
# read every number would walk every value on every update of its row (40 ms for an
# array of 100,000 numbers), so the reading side takes such an integer as a Decimal
# (postgres/executor.py, read_json).

# An outbox event's detail, as JSON text (EventBridge takes an entry of at most 256 KB).
MAX_OUTBOX_DETAIL_BYTES: Final = _MAX_DETAIL_BYTES
