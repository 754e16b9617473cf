"""One family of errors, each carrying its data; the docstring is the default message."""

from __future__ import annotations

from typing import Any
from uuid import UUID


class TickqError(Exception):
    """A tickq operation failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class InvalidJob(TickqError):
    """The job request is invalid."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"invalid {field}: {reason}")


class UnknownJobType(InvalidJob):
    """No handler is registered for this job type."""

    def __init__(self, type_: str, known: list[str]) -> None:
        self.type = type_
        self.known = known
        listed = ", ".join(known) if known else "none"
        super().__init__("type", f"no handler is registered for {type_!r} (known: {listed})")


class InvalidParent(InvalidJob):
    """A job named in `after` cannot be waited for; nothing was enqueued."""

    def __init__(self, parent_id: UUID | str, reason: str) -> None:
        self.parent_id = parent_id
        super().__init__("after", f"job {parent_id} {reason}")


class JobNotFound(TickqError):
    """No such job (or it belongs to someone else)."""

    def __init__(self, job_id: UUID | str) -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id} not found")


class InvalidTransition(TickqError):
    """The job is not in a state that allows this operation."""

    def __init__(self, job_id: UUID | str, status: str, operation: str) -> None:
        self.job_id = job_id
        self.status = status
        self.operation = operation
        super().__init__(f"cannot {operation} job {job_id}: it is {status}")


class LeaseLost(TickqError):
    """The worker no longer holds this job's lease; its write was refused."""

    def __init__(self, job_id: UUID | str) -> None:
        self.job_id = job_id
        super().__init__(
            f"lease lost on job {job_id}: it expired and the job was reclaimed or finished"
        )


class QueueFull(TickqError):
    """The queue is at its maximum depth, or `of_owner` at its cap of live jobs for the
    jobs' owner; enqueue was refused (backpressure)."""

    def __init__(self, queue: str, depth: int, limit: int, *, of_owner: bool = False) -> None:
        self.queue = queue
        self.depth = depth
        self.limit = limit
        self.of_owner = of_owner  # the owner's cap in the queue (max_depth_per_owner)
        if of_owner:
            message = f"queue {queue!r} is full for this owner: {depth} live jobs, limit {limit}"
        else:
            message = f"queue {queue!r} is full: {depth} waiting jobs, limit {limit}"
        super().__init__(message)


class ConfigurationError(TickqError):
    """tickq is misconfigured."""


class DatabaseError(TickqError):
    """The database failed or could not be reached."""


class HandlerConnectionLost(DatabaseError):
    """A transactional handler's connection failed: refused until its job's lease ran out
    (the handler never ran), or lost during its transaction (whether that committed is the
    database's to know). The worker reports nothing and leaves the job to the reclaim, as a
    worker that lost the database would: a committed success stands, and an attempt that
    did not commit is retried once its lease expires."""


class SchemaError(TickqError):
    """This database's tickq schema is not one `tickq migrate` can bring up to date; nothing
    was changed."""


# Handler signals: raised by job handlers, interpreted by the tick runner.


class PermanentError(Exception):
    """Raise from a handler to send the job to the dead letters at once, without retries."""


class HandlerTimedOut(TickqError):
    """The handler outlived its timeout: its attempt has ended (failed), so its job context
    refuses progress, heartbeats and steps from then on."""

    def __init__(self, job_id: UUID | str, seconds: float) -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id} timed out after {seconds:g} s: its attempt has ended")


class RetryAfter(Exception):
    """Raise from a handler to run the job again after `seconds`, without counting an error."""

    def __init__(self, seconds: float, reason: str = "") -> None:
        if not seconds >= 0:
            raise ValueError(f"RetryAfter seconds must be >= 0, got {seconds!r}")
        self.seconds = float(seconds)
        self.reason = reason
        super().__init__(reason or f"retry after {seconds} s")


class JobCancelled(Exception):
    """Raised inside a handler at a progress/heartbeat call when the job was asked to cancel."""

    def __init__(self, job_id: Any) -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id} was cancelled while running")
