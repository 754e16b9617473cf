"""Statements that meet a job another transaction just moved between partitions.

tickq.jobs keeps live and finished jobs in different partitions, so an update that
finishes, cancels or retries a job moves its row. A statement that was waiting for that row
(a finish behind a reclaim, a cancel behind a finish, a claim behind a cancel) then fails
with SQLSTATE 40001 instead of re-reading the row as it would within one partition. When the
statement is the whole transaction (an autocommit connection, nothing begun by the caller),
running it again is exactly that re-read: it sees the job where it now is. Inside a
caller's transaction nothing is retried; the caller hears "safe to retry".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import pq

__all__ = ["MOVED_ROW_ATTEMPTS", "is_moved_row", "rerun", "retryable"]

_T = TypeVar("_T")

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
