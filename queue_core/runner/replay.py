"""Replaying a job's stored history against new handler code, without side effects: what
`tickq deploy check` runs before a deploy (docs/steps.md, "Deploying durable code").

The handler runs with a `job` whose steps return their stored results and never call their
function, whose waits and sleeps return what they returned, whose maps enqueue nothing and
whose progress and heartbeats go nowhere. The replay stops where the history ends (the
first durable call the history has no entry for, once every stored step was asked for):
what the live run would do from there is new work, not a replay. It breaks when the new
code asks, while stored steps are still ahead of it, for a step the history does not hold
(a renamed, removed or inserted step), ends or raises before it has asked for every stored
step, or deprecates a patch whose marker the history lacks at a point it went past.

Stored steps are matched by name, as the runner matches them: code that asks for the same
steps in another order replays the same results, so only a name the history lacks breaks it.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from queue_core.model import steps
from queue_core.model.jobs import Job
from queue_core.model.steps import InvalidStep, Retry
from queue_core.runner.context import AsyncJobContext, JobContext
from queue_core.runner.timeouts import run_async
from queue_core.store.port import LeaseState

# What a replayed job's lease reads as: a replay holds none, so it never runs out.
_NO_LEASE_END = datetime(9999, 1, 1, tzinfo=UTC)
_NO_LEASE = UUID(int=0)


@dataclass(frozen=True, slots=True)
class History:
    """One unfinished durable job as stored: its row, the code version its last run ran
    under, its steps in the order they were stored (name, result), the patches marked on it."""

    job: Job
    code_version: str | None
    steps: tuple[tuple[str, Any], ...]
    patches: frozenset[str] = frozenset()
    # Where its last run stopped, when at a named point it did not store (steps.frontier):
    # the sleep, signal or map step it waits for, a step that retries.
    frontier: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Break:
    """Where a replay left the history: the first stored step the new code did not ask
    for (`stored`, at `position` in the stored order) and what it did instead (`asked`: a
    step's name, or None when it ended or raised), in words (`reason`)."""

    position: int
    stored: str | None
    asked: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class Replayed:
    """One job's replay: its Break (None: the new code replays its history), the patches
    it answered False to (the history passed them without their marker), and how many
    stored steps it replayed."""

    history: History
    broken: Break | None
    lacking: frozenset[str] = frozenset()
    replayed: int = 0
    patches: frozenset[str] = frozenset()  # every patch name the new code asked about

    def to_dict(self) -> dict[str, Any]:
        job = self.history.job
        out: dict[str, Any] = {
            "id": str(job.id),
            "type": job.type,
            "status": job.status.value,
            "code_version": self.history.code_version,
            "stored_steps": len(self.history.steps),
            "replayed_steps": self.replayed,
            "breaks": self.broken is not None,
        }
        if self.broken is not None:
            out.update(
                position=self.broken.position,
                stored=self.broken.stored,
                asked=self.broken.asked,
                reason=self.broken.reason,
            )
        return out


class _HistoryEnd(BaseException):
    """The handler reached the end of its history: the rest is new work. A BaseException,
    as Suspended, so a handler's `except Exception` does not swallow it."""


class _Diverged(BaseException):
    """The handler asked for something its history does not hold."""

    def __init__(self, broken: Break) -> None:
        self.broken = broken
        super().__init__(broken.reason)


class ReplaySteps:
    """A replayed job's steps (JobSteps' operations): stored results, never a function call."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.results = dict(history.steps)
        self.order = [name for name, _ in history.steps]
        self.asked: set[str] = set()
        self.names: set[str] = set()  # every name used by this replay, stored or not
        self.lacking: set[str] = set()
        self.patches: set[str] = set()

    def pending(self) -> list[str]:
        """The stored steps not yet asked for, in stored order, then the point where the
        last run stopped (until the replay reaches it)."""
        ahead = [name for name in self.order if name not in self.asked]
        return ahead + [name for name in self.history.frontier if name not in self.names]

    def _ask(self, name: Any, what: str = "step name") -> Any:
        """The stored result of `name`; at the history's end (where the last run stopped),
        stop the replay; before it, a name the history lacks breaks it."""
        name = steps.step_name(name, what)
        if name in self.names:
            raise InvalidStep(f"{name!r} is used twice in this job: step names are unique")
        if name in self.results:
            self.names.add(name)
            self.asked.add(name)
            return self.results[name]
        pending = self.pending()
        self.names.add(name)
        if pending and pending[0] not in self.history.frontier:
            raise _Diverged(
                Break(
                    len(self.asked),
                    pending[0],
                    name,
                    f"asks for {name!r} where its history has {pending[0]!r}",
                )
            )
        if pending and name not in self.history.frontier:
            raise _Diverged(
                Break(
                    len(self.asked),
                    pending[0],
                    name,
                    f"asks for {name!r} where its last run stopped at {pending[0]!r}",
                )
            )
        raise _HistoryEnd()

    # The operations of a handler's `job` (JobContext delegates to these)

    def step(
        self,
        name: Any,
        fn: Callable[[], Any],
        *,
        retry: Retry | None = None,
        undo: Callable[..., Any] | None = None,
    ) -> Any:
        return self._ask(name)

    async def step_async(
        self,
        name: Any,
        fn: Callable[[], Any],
        *,
        retry: Retry | None = None,
        undo: Callable[..., Any] | None = None,
    ) -> Any:
        return self._ask(name)

    def map(self, name: Any, type: Any, payloads: Any, max_concurrency: Any = None) -> list[Any]:
        return list(self._ask(name))

    def call(self, name: Any, type: Any, payload: Any = None) -> Any:
        return self.map(name, type, [payload])[0]

    def sleep(self, name: Any, seconds: Any) -> None:
        self._ask(name)

    def wait_for(self, name: Any, timeout: Any = None) -> Any:
        stored = self._ask(name, "signal name")
        return steps.waited(steps.step_name(name, "signal name"), stored)

    def suspend(self, delay: Any = 0) -> None:
        """The live run would leave the worker here: what it does after is not known."""
        raise _HistoryEnd()

    def time_left(self) -> float:
        return math.inf  # a replay never runs out of time, so it never suspends on its own

    def patched(self, name: Any) -> bool:
        name = steps.step_name(name, "patch name")
        self.patches.add(name)
        if name in self.history.patches:
            return True
        if self.pending():  # the code that stored the rest went past here without the call
            self.lacking.add(name)
            return False
        return True

    def deprecate_patch(self, name: Any) -> None:
        name = steps.step_name(name, "patch name")
        self.patches.add(name)
        if name in self.history.patches:
            return
        pending = self.pending()
        if pending:
            self.lacking.add(name)
            raise _Diverged(
                Break(
                    len(self.asked),
                    pending[0],
                    None,
                    f"deprecates patch {name!r}, but its history went past it without "
                    "the patch: keep job.patched until no stored history lacks it",
                )
            )


class ReplayLeases:
    """A replayed job's lease keeper: a replay holds no lease, so progress, heartbeats and
    flow holds are not written; parent results are read through `parent_results` (reads
    only)."""

    def __init__(self, parent_results: Callable[[UUID], dict[UUID, Any]]) -> None:
        self._parent_results = parent_results

    def extend_lease(
        self, job_id: UUID, lease_token: UUID, seconds: float, *, now: datetime | None = None
    ) -> LeaseState:
        return LeaseState(_NO_LEASE_END, False)

    def report_progress(
        self, job_id: UUID, lease_token: UUID, progress: Any, *, now: datetime | None = None
    ) -> bool:
        return False

    def hold_flow(self, job_id: UUID, lease_token: UUID, key: str, seconds: float) -> datetime:
        return datetime.now(UTC)  # a hold a replayed handler asks for is not set

    def parent_results(self, job_id: UUID) -> dict[UUID, Any]:
        return self._parent_results(job_id)


def replay(
    task: Any,
    history: History,
    *,
    parent_results: Callable[[UUID], dict[UUID, Any]] = lambda _: {},
) -> Replayed:
    """Run `task`'s handler against `history` (see the module's docstring)."""
    steps_ = ReplaySteps(history)
    keeper = ReplayLeases(parent_results)
    context_type = AsyncJobContext if task.is_async else JobContext
    # A replay holds no lease; the context's fenced calls want a token to pass (unused).
    row = replace(history.job, lease_token=history.job.lease_token or _NO_LEASE)
    job = context_type(row, keeper, history.job.lease_seconds or 0)
    job._steps = steps_  # type: ignore[assignment]  # the replay's, in place of a runner's
    broken: Break | None = None
    try:
        if task.is_async:
            run_async(_awaited(task.fn(job)))
        else:
            task.fn(job)
    except _HistoryEnd:
        pass
    except _Diverged as diverged:
        broken = diverged.broken
    except Exception as exc:
        pending = steps_.pending()
        if pending:
            reason = f"raises {type(exc).__name__}: {exc} before its stored step {pending[0]!r}"
            broken = Break(len(steps_.asked), pending[0], None, reason)
    else:
        pending = steps_.pending()
        if pending:
            reason = f"returns before its stored step {pending[0]!r}"
            broken = Break(len(steps_.asked), pending[0], None, reason)
    return Replayed(
        history,
        broken,
        frozenset(steps_.lacking),
        len(steps_.asked),
        frozenset(steps_.patches),
    )


async def _awaited(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


@dataclass(frozen=True, slots=True)
class DeployCheck:
    """What `tickq deploy check` found: each replayed job, the task types it could not
    replay (and why), and per patch name how many stored histories lack its marker."""

    replays: list[Replayed]
    skipped: dict[str, str] = field(default_factory=dict)
    patches: dict[str, int] = field(default_factory=dict)

    @property
    def broken(self) -> list[Replayed]:
        return [r for r in self.replays if r.broken is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": not self.broken,
            "checked": len(self.replays),
            "breaking": [r.to_dict() for r in self.broken],
            "jobs": [r.to_dict() for r in self.replays],
            "skipped_types": self.skipped,
            # A patch no stored history lacks may be deprecated: its old branch deleted.
            "patches": [
                {"name": name, "lacking": lacking, "retirable": lacking == 0}
                for name, lacking in sorted(self.patches.items())
            ],
        }


def check(
    tasks: Mapping[str, Any],
    histories: Iterable[History],
    *,
    parent_results: Callable[[UUID], dict[UUID, Any]] = lambda _: {},
) -> DeployCheck:
    """Replay every history whose type `tasks` defines; batch and transactional handlers
    are not replayed (a batch handler's jobs have no steps; a transactional one is handed a
    connection, which a replay must not give)."""
    replays: list[Replayed] = []
    skipped: dict[str, str] = {}
    patches: dict[str, int] = {}
    for history in histories:
        task = tasks.get(history.job.type)
        if task is None:
            continue
        if task.batch_size is not None or task.transactional:
            kind = "batch" if task.batch_size is not None else "transactional"
            skipped[task.name] = f"a {kind} handler is not replayed"
            continue
        replayed = replay(task, history, parent_results=parent_results)
        replays.append(replayed)
        for name in replayed.patches:
            patches[name] = patches.get(name, 0) + (name in replayed.lacking)
    return DeployCheck(replays, skipped, patches)
