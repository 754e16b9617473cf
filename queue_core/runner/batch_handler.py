"""Batch consume: the jobs of one type in a claim handed to one handler call, each settled
on its own (as SQS's partial batch failures).

A batch handler (`@task(name, batch_size=N)`) is called as `fn(batch)` with up to N of the
claim's jobs of its type, in claim order. Returning None succeeds every job; returning a
list gives job i the result at i; raising fails them all as one handler's exception would
fail one job. `batch.fail(job, exc)` and `batch.retry_after(job, seconds)` settle single
jobs first, whatever the call then returns or raises. Each job keeps its own lease,
attempts and backoff; `batch.extend_lease()` extends every job's lease.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any
from uuid import UUID

from queue_core.errors import RetryAfter
from queue_core.model.jobs import Job, Outcome
from queue_core.runner.context import JobContext


class BatchResultMismatch(Exception):
    """A batch handler returned something other than None or one result per job."""


class HandlerBatch:
    """Passed to batch handlers as `batch`: `batch.jobs` (job contexts, in claim order) and
    `batch.id`, the call's id that the views of each job show ("part of batch X")."""

    __slots__ = ("_settled", "id", "jobs")

    def __init__(self, batch_id: UUID, jobs: list[JobContext]) -> None:
        self.id = batch_id
        self.jobs = jobs
        self._settled: dict[UUID, BaseException] = {}

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[JobContext]:
        return iter(self.jobs)

    def fail(self, job: JobContext | Job | UUID, error: BaseException | str) -> None:
        """Fail this one job as if its own handler raised `error` (a PermanentError sends
        it to the dead letters, any other exception or text retries it with backoff)."""
        exc = error if isinstance(error, BaseException) else Exception(str(error))
        self._settled[self._member(job)] = exc

    def retry_after(self, job: JobContext | Job | UUID, seconds: float) -> None:
        """Run this one job again after `seconds`, without counting an error."""
        self._settled[self._member(job)] = RetryAfter(seconds)

    def extend_lease(self, seconds: float | None = None) -> None:
        """Extend every job's lease (the heartbeat of a long batch call)."""
        for job in self.jobs:
            job.extend_lease(seconds)

    heartbeat = extend_lease

    def _member(self, job: JobContext | Job | UUID) -> UUID:
        job_id = job if isinstance(job, UUID) else job.id
        if not any(member.id == job_id for member in self.jobs):
            raise ValueError(f"job {job_id} is not part of batch {self.id}")
        return job_id

    def outcomes(
        self,
        returned: Any,
        raised: BaseException | None,
        *,
        judge: Callable[[Job, BaseException], Outcome],
        succeed: Callable[[Job, Any], Outcome],
    ) -> list[Outcome]:
        """Each job's outcome, in order: its own settlement first, else the call's; each
        names this call (stored with it, so the views of the job show it)."""
        rows = [job.row for job in self.jobs]
        if raised is None:
            raised = _mismatch(returned, len(rows))
        out = []
        for i, row in enumerate(rows):
            settled = self._settled.get(row.id)
            if settled is not None:
                out.append(judge(row, settled))
            elif raised is not None:
                out.append(judge(row, raised))
            else:
                out.append(succeed(row, None if returned is None else returned[i]))
        return [replace(outcome, batch_id=self.id) for outcome in out]


def _mismatch(returned: Any, count: int) -> BatchResultMismatch | None:
    if returned is None:
        return None
    if isinstance(returned, Sequence) and not isinstance(returned, str | bytes):
        if len(returned) == count:
            return None
        shown = f"{len(returned)} results"
    else:
        shown = f"a {type(returned).__name__}"
    return BatchResultMismatch(
        f"the batch handler returned {shown} for {count} jobs: return None or a list of "
        f"{count} results, one per job in order"
    )


def group(jobs: Sequence[Job], sizes: Sequence[int | None]) -> list[list[int]]:
    """The claim's jobs as handler calls: indices of each batch handler's jobs in chunks of
    its batch size (claim order kept), and every other job alone."""
    units: list[list[int]] = []
    open_chunk: dict[str, list[int]] = {}
    for i, (job, size) in enumerate(zip(jobs, sizes, strict=True)):
        if size is None:
            units.append([i])
            continue
        chunk = open_chunk.get(job.type)
        if chunk is None or len(chunk) >= size:
            chunk = open_chunk[job.type] = []
            units.append(chunk)
        chunk.append(i)
    return units
