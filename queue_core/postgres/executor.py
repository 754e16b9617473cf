"""The one way tickq runs SQL: a named statement, its rows, its errors as tickq errors.

Every PostgreSQL module runs its statements through an `Executor`: the store's parts, the
durable steps, the standing policies (schedules, limits, retention, partitions) and the
operator console. Here, and only here, driver errors become tickq errors, a statement that
met a job moved between partitions runs again, and rows that carry a job are read by
column name once and then by position.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, TypeVar
from uuid import UUID

import psycopg
import psycopg.errors
from psycopg import pq
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.rows import dict_row

from queue_core.errors import (
    DatabaseError,
    InvalidJob,
    InvalidParent,
    InvalidTransition,
    JobNotFound,
    QueueFull,
    TickqError,
)
from queue_core.model.jobs import JOB_COLUMNS, Job, job_from_row
from queue_core.postgres.statements import QUERIES

__all__ = [
    "MOVED_ROW_ATTEMPTS",
    "Executor",
    "Reading",
    "StaleCount",
    "is_moved_row",
    "rerun",
    "retryable",
    "translate_errors",
]

_T = TypeVar("_T")

QUEUE_FULL_SQLSTATE = "TQ429"  # raised by the jobs_app_admit trigger
# A bound of the application role refused (jobs_app_admit, jobs_app_guard, dependencies);
# the detail names the field.
BOUND_SQLSTATE = "TQ422"
STALE_COUNT_SQLSTATE = "TQ409"  # raised by tickq.operator_retry_dead
# The application login's functions (tickq.cancel, tickq.retry, tickq.signal, enqueue_many):
# a job in no state for the operation (its id the detail), a parent that cannot be waited
# for (its id the detail), no such job of the user (its id the detail).
WRONG_STATE_SQLSTATE = "TQ410"
BAD_PARENT_SQLSTATE = "TQ404"
NOT_FOUND_SQLSTATE = "P0002"
# tickq.job_ids' key: an id another job holds.
_ID_TAKEN = "job_ids_pkey"
_WRONG_STATE = re.compile(r"cannot (?P<operation>.+) job \S+: it is \w+$", re.S)

# Rows of a statement as what a reading makes of them, given where the job columns begin.
Reading = Callable[[list[Any], int], list[Any]]


class StaleCount(TickqError):
    """The jobs an operator confirmed changed before the action ran; `current` match now."""

    def __init__(self, current: int) -> None:
        self.current = current
        super().__init__(f"the jobs changed since they were counted ({current} match now)")


@contextmanager
def translate_errors() -> Iterator[None]:
    """Driver errors become tickq errors here, and only here."""
    try:
        yield
    except TickqError:
        raise
    except psycopg.errors.InsufficientPrivilege as exc:
        raise TickqError(f"permission denied: {exc.diag.message_primary or exc}") from exc
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.constraint_name == _ID_TAKEN:
            raise InvalidJob("id", "is taken by another job") from exc
        raise InvalidJob("idempotency_key", "is held by another live job") from exc
    except psycopg.errors.InvalidParameterValue as exc:
        # tickq's functions name the field they refused as the error's column.
        field = exc.diag.column_name or "job"
        message = (exc.diag.message_primary or str(exc)).removeprefix("tickq: ")
        raise InvalidJob(field, message.removeprefix(f"{field} ")) from exc
    except (psycopg.errors.CheckViolation, psycopg.DataError) as exc:
        raise InvalidJob("job", exc.diag.message_primary or str(exc)) from exc
    except UnicodeEncodeError:
        # A lone surrogate (invalid UTF-8 decoded with surrogateescape, e.g. from argv) in any
        # text parameter: the driver cannot encode it, so nothing reached the database.
        raise InvalidJob("text", "is not valid UTF-8 (lone surrogate characters)") from None
    except psycopg.errors.QueryCanceled as exc:
        raise DatabaseError(f"statement cancelled (statement_timeout?): {exc}") from exc
    except (psycopg.errors.TransactionRollback, psycopg.errors.SerializationFailure) as exc:
        raise DatabaseError(f"transaction rolled back, safe to retry: {exc}") from exc
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"database unavailable: {exc}") from exc
    except psycopg.Error as exc:
        raise _tickq_error(exc) from exc


def _tickq_error(exc: psycopg.Error) -> TickqError:
    """What one of tickq's own SQLSTATEs (raised by its functions and triggers) means."""
    if exc.sqlstate == QUEUE_FULL_SQLSTATE:
        limit = int(exc.diag.message_hint or 0)
        return QueueFull(exc.diag.message_detail or "", limit, limit)
    if exc.sqlstate == BOUND_SQLSTATE:
        message = (exc.diag.message_primary or "").removeprefix("tickq: ")
        return InvalidJob(exc.diag.message_detail or "job", message)
    if exc.sqlstate == STALE_COUNT_SQLSTATE:
        return StaleCount(int(exc.diag.message_detail or 0))
    message = (exc.diag.message_primary or "").removeprefix("tickq: ")
    detail = exc.diag.message_detail or ""
    if exc.sqlstate == NOT_FOUND_SQLSTATE and detail:
        return JobNotFound(detail)
    if exc.sqlstate == WRONG_STATE_SQLSTATE:
        found = _WRONG_STATE.search(message)
        operation = found["operation"] if found else "change"
        return InvalidTransition(detail, exc.diag.message_hint or "", operation)
    if exc.sqlstate == BAD_PARENT_SQLSTATE:
        reason = message.split(f"job {detail} ", 1)[-1]
        return InvalidParent(detail, reason)
    return DatabaseError(f"database error: {exc}")


# Statements that meet a job another transaction just moved between partitions.
#
# tickq.jobs keeps live and finished jobs in different partitions, so an update that
# finishes, cancels or retries a job moves its row. A statement that was waiting for that
# row (a finish behind a reclaim, a cancel behind a finish, a claim behind a cancel) then
# fails with SQLSTATE 40001 instead of re-reading the row as it would within one partition.
# When the statement is the whole transaction (an autocommit connection, nothing begun by
# the caller), running it again is exactly that re-read: it sees the job where it now is.
# Inside a caller's transaction nothing is retried; the caller hears "safe to retry".

# A job moves at most twice in a row (finished, retried), so a few attempts always suffice;
# the bound only keeps a pathological loop from spinning.
MOVED_ROW_ATTEMPTS = 5


def is_moved_row(exc: BaseException | None) -> bool:
    """The error PostgreSQL raises when a row it waited for moved to another partition, or
    the tickq error that carries it."""
    if exc is not None and not isinstance(exc, psycopg.Error):
        exc = exc.__cause__
    return isinstance(exc, psycopg.errors.SerializationFailure) and "another partition" in (
        exc.diag.message_primary or ""
    )


def retryable(conn: psycopg.Connection[Any], exc: BaseException, attempt: int) -> bool:
    """Whether a statement that failed with `exc` on its `attempt`-th run may run again: it
    met a moved row, and it was its own transaction. Checked after the failure, where an
    autocommit connection is idle again while a caller's transaction is left in error."""
    return (
        attempt < MOVED_ROW_ATTEMPTS
        and is_moved_row(exc)
        and conn.autocommit
        and conn.info.transaction_status == pq.TransactionStatus.IDLE
    )


def rerun(conn: psycopg.Connection[Any], statement: Callable[[], _T]) -> _T:
    """`statement()`, run again while it fails on a moved row and may run again."""
    attempt = 1
    while True:
        try:
            return statement()
        except Exception as exc:
            if not retryable(conn, exc, attempt):
                raise
            attempt += 1


class Executor:
    """Named statements on one connection, scoped to `user_id` by row-level security.

    With an autocommit connection each statement is its own transaction; with a connection
    inside the caller's transaction, statements join it.
    """

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        *,
        user_id: UUID | None = None,
        statement_timeout_ms: int | None = None,
    ) -> None:
        _read_json_as_the_engine(conn)
        self.conn = conn
        self.user_id = user_id
        self.statement_timeout_ms = statement_timeout_ms
        self._threads = threading.local()
        self._may_write: bool | None = None

    def through_functions(self) -> bool:
        """Whether this connection writes through the application login's functions
        (tickq.enqueue_many, tickq.cancel, ...): a user's scope always does, and so does a
        login that may not write the jobs itself (an application's connection that names
        its user with set_config). Asked of the database once per executor."""
        if self.user_id is not None:
            return True
        if self._may_write is None:
            with translate_errors(), self.conn.cursor() as cur:
                cur.execute("select has_table_privilege('tickq.jobs', 'INSERT')")
                row = cur.fetchone()
            self._may_write = bool(row and row[0])
        return not self._may_write

    def note_may_write(self, may_write: bool) -> None:
        """What a statement that read it (the limits probe's) found of this login's right
        to write the jobs, sparing `through_functions` a round trip of its own."""
        self._may_write = bool(may_write)

    def rows(
        self,
        name: str,
        params: dict[str, Any],
        reading: Reading | None = None,
        *,
        binary: bool = False,
    ) -> list[Any]:
        """Run one named statement; `binary` results skip text parsing of uuids and times.
        With `reading`, rows that carry a job come back as what it makes of them. Run again
        when it met a job that another transaction moved between partitions."""
        return rerun(self.conn, lambda: self._rows_once(name, params, reading, binary))

    def _rows_once(
        self, name: str, params: dict[str, Any], reading: Reading | None, binary: bool
    ) -> list[Any]:
        query = QUERIES[name]
        with translate_errors(), self.scope(), self.cursor(binary=binary) as cur:
            cur.execute(query, params)
            # The result status, not cur.description: describing a whole job row builds
            # a Column per field, which costs more than a one-row statement's parsing.
            result = cur.pgresult
            if result is None or result.status != pq.ExecStatus.TUPLES_OK:
                return []
            rows = cur.fetchall()
            if reading is None or not rows:
                return rows
            return reading(rows, job_columns_at(name, cur))

    def dicts(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """One named statement's rows by column name: for the standing policies and the
        console, whose statements return few rows, off the hot path."""

        def once() -> list[dict[str, Any]]:
            with translate_errors(), self.scope(), self.conn.cursor(row_factory=dict_row) as cur:
                cur.execute(QUERIES[name], params)
                return cur.fetchall() if cur.description else []

        return rerun(self.conn, once)

    def cursor(self, *, binary: bool = False) -> psycopg.Cursor[Any]:
        """A cursor of this connection; binary ones load jsonb with the fast loader."""
        cur = self.conn.cursor(binary=binary)
        if binary:
            cur.adapters.register_loader("jsonb", _JsonbBinaryLoader)
        return cur

    def thread_cursor(self) -> psycopg.Cursor[Any]:
        """This thread's kept cursor. A kept cursor keeps the adapters it looked up for a
        statement's parameters; a new one looks them all up again, which cost a single
        enqueue a sixth of its client time. One per thread: the connection may be shared
        by threads, a cursor may not."""
        cur: psycopg.Cursor[Any] | None = getattr(self._threads, "cursor", None)
        if cur is None or cur.closed:
            cur = self._threads.cursor = self.conn.cursor()
        return cur

    @contextmanager
    def scope(self) -> Iterator[None]:
        """The user's scope around a statement (a transaction setting tickq.user_id)."""
        if self.user_id is None:
            yield
            return
        with self.conn.transaction():
            params = {"user_id": str(self.user_id), "statement_timeout": self.statement_timeout_ms}
            self.conn.execute(QUERIES["user_scope"], params)
            yield

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Several statements as one: a savepoint inside the caller's transaction, a
        transaction of its own on an autocommit connection. A connection that is neither
        (no transaction begun yet) starts the caller's with the first statement."""
        status = self.conn.info.transaction_status
        if not self.conn.autocommit and status == pq.TransactionStatus.IDLE:
            yield
            return
        with translate_errors(), self.conn.transaction():
            yield


class _JsonbBinaryLoader(Loader):
    """jsonb as psycopg loads it, minus the generic loader's overhead: empty objects and
    arrays (most payloads and error histories) skip the parser, the rest parse from str."""

    format = pq.Format.BINARY

    def load(self, data: Buffer) -> Any:
        body = bytes(data[1:])  # after the jsonb format version byte
        if body == b"{}":
            return {}
        if body == b"[]":
            return []
        return read_json(body)


class _JsonTextLoader(Loader):
    """json and jsonb as text (and json in binary, which is its text), read by read_json."""

    def load(self, data: Buffer) -> Any:
        return read_json(bytes(data))


class _JsonBinaryLoader(_JsonTextLoader):
    format = pq.Format.BINARY


_JSONB_OID = psycopg.postgres.types["jsonb"].oid


def _read_json_as_the_engine(conn: psycopg.Connection[Any]) -> None:
    """Every json and jsonb value `conn` reads, in any cursor, read by read_json. Once per
    connection: an executor is made per statement on some paths."""
    adapters = conn.adapters
    if adapters.get_loader(_JSONB_OID, pq.Format.TEXT) is _JsonTextLoader:
        return
    adapters.register_loader("json", _JsonTextLoader)
    adapters.register_loader("jsonb", _JsonTextLoader)
    adapters.register_loader("json", _JsonBinaryLoader)
    adapters.register_loader("jsonb", _JsonbBinaryLoader)


def read_json(text: str | bytes) -> Any:
    """JSON text as the engine reads it from the database. jsonb prints a number in all its
    digits (1e5000 as 5001 of them), where Python reads an integer of at most 4300 from text
    (sys.get_int_max_str_digits) and raises ValueError: such an integer comes back as a
    Decimal, so a row that holds one never fails a read of the rows beside it. No table
    bounds numbers: a check would walk every value on every update of its row."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer over the digit limit: read again, that one as a Decimal
        return json.loads(text, parse_int=_long_int)


def _long_int(digits: str) -> int | Decimal:
    try:
        return int(digits)
    except ValueError:
        return Decimal(digits)


# Where the job columns begin in each statement's rows, found by name on its first run.
_JOB_AT: dict[str, int] = {}


def job_columns_at(statement: str, cur: psycopg.Cursor[Any]) -> int:
    """The rows of `statement` carry the job columns from this index on, in JOB_COLUMNS
    order: checked by their names once per statement, then read by position (naming each
    field of each row would cost more than parsing it)."""
    at = _JOB_AT.get(statement)
    if at is None:
        result = cur.pgresult
        assert result is not None
        names = tuple((result.fname(i) or b"").decode() for i in range(result.nfields))
        width = len(JOB_COLUMNS)
        found = [i for i in range(len(names) - width + 1) if names[i : i + width] == JOB_COLUMNS]
        if not found:
            raise DatabaseError(f"{statement} does not return the job columns by name: {names}")
        at = _JOB_AT[statement] = found[0]
    return at


def jobs(rows: list[Any], at: int) -> list[Job]:
    """A reading: each row's job."""
    return [job_from_row(row[at:] if at else row) for row in rows]


def jobs_and_flags(rows: list[Any], at: int) -> list[tuple[Job, bool]]:
    """A reading for jobs_enqueue_one: the job, then whether it is a duplicate."""
    width = len(JOB_COLUMNS)
    return [(job_from_row(row[at : at + width]), row[at + width]) for row in rows]


def ids_and_jobs(rows: list[Any], at: int) -> list[tuple[Any, Job | None]]:
    """A reading for the finish-and-claim statements: the held ids (first row only), then a
    job or all nulls."""
    return [(row[0], None if row[at] is None else job_from_row(row[at:])) for row in rows]
