"""Stopping a handler at its timeout (the job's timeout_seconds, else its task's).

Each kind of handler is stopped the way it can be:

* async: its task is cancelled at the timeout (Runner._run_async).
* isolation="process": the call runs in a child process, which is sent SIGTERM at the
  timeout and SIGKILL KILL_GRACE_SECONDS later; nothing it would do after that runs.
* a plain function: Python cannot stop a thread, so the call runs in a thread of its own
  that the runner stops waiting for. The attempt fails at once, the late return is never
  read, and its job context refuses every write from then on (HandlerTimedOut); the
  thread is left to end on its own and counted as abandoned until it does.

Whichever kind, the attempt fails with "timed out after N s" and retries with backoff
like any failure.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import multiprocessing
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar
from uuid import UUID

from queue_core.model.jobs import Job

T = TypeVar("T")

# How long a child process has to exit after SIGTERM before it is killed.
KILL_GRACE_SECONDS = 2.0

# How many abandoned handler threads a runner lives with: past it, it stops claiming (a
# tick for the rest of its run; `tickq work` then exits to be started afresh), since each
# one may hold memory, sockets or locks that only the end of the process gives back.
DEFAULT_MAX_ABANDONED = 8


def timeout_of(job: Job, task_timeout: int | None) -> int | None:
    """A job's own timeout, else its task's (jobs enqueued without the registry, through
    SQL or the API, get the timeout their handler's task names)."""
    return job.timeout_seconds if job.timeout_seconds is not None else task_timeout


# A plain handler in a thread of its own


@dataclass(slots=True)
class ThreadCall:
    """A handler call in its own thread: what it returned or raised, once `done` is set."""

    done: threading.Event
    result: Any = None
    raised: BaseException | None = None
    thread: threading.Thread | None = None


def call_in_thread(fn: Callable[[Any], Any], context: Any, timeout: float) -> ThreadCall:
    """Run fn(context) in a daemon thread and wait at most `timeout` seconds for it. A call
    still running then is left to end (its ThreadCall's `done` is not set); a daemon
    thread, so a hung one never keeps the process from exiting."""
    call = ThreadCall(threading.Event())

    def run() -> None:
        try:
            call.result = fn(context)
        except BaseException as exc:  # handed to the runner, which judges it
            call.raised = exc
        finally:
            call.done.set()

    call.thread = threading.Thread(target=run, name="tickq-timed-handler", daemon=True)
    call.thread.start()
    call.done.wait(timeout)
    return call


class AbandonedHandlers:
    """The threads of handlers that outlived their timeout, counted until they end."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._timed_out = 0

    def add(self, thread: threading.Thread | None) -> None:
        with self._lock:
            self._timed_out += 1
            if thread is not None and thread.is_alive():
                self._threads.append(thread)

    def count_timeout(self) -> None:
        with self._lock:
            self._timed_out += 1

    def take_timeouts(self) -> int:
        """Attempts stopped at their timeout since the last call."""
        with self._lock:
            taken, self._timed_out = self._timed_out, 0
            return taken

    @property
    def running(self) -> int:
        """Abandoned handler threads still running (a gauge)."""
        if not self._threads:  # the usual case, without the lock: no handler ever hung
            return 0
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            return len(self._threads)

    def past(self, bound: int | None) -> bool:
        """Whether more than `bound` abandoned threads still run (never, without a bound)."""
        return bound is not None and len(self._threads) > bound and self.running > bound


# A handler in a child process


class ChildJob:
    """The `job` a process-isolated handler receives: its id, payload and attempt only. The
    child has no connection to the queue, so no progress, heartbeats or durable steps."""

    __slots__ = ("attempt", "id", "max_attempts", "payload", "type")

    def __init__(
        self, id: UUID, type: str, payload: dict[str, Any], attempt: int, max_attempts: int
    ) -> None:
        self.id = id
        self.type = type
        self.payload = payload
        self.attempt = attempt
        self.max_attempts = max_attempts

    def __repr__(self) -> str:
        return f"<job {self.type} {self.id} attempt {self.attempt} (child process)>"


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    """What the child process reported: `result_json` when it returned; else the exception's
    type name and message (and a RetryAfter's seconds); `timed_out` when it was killed."""

    result_json: str | None = None
    error_type: str | None = None
    error: str = ""
    retry_after: float | None = None
    timed_out: bool = False
    exit_code: int | None = None


def _context() -> Any:
    """forkserver: a fresh child forked from a clean server process, never from the runner's
    threads (fork would copy their locks mid-use); spawn where forkserver is missing."""
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if "forkserver" in methods:
        context.set_forkserver_preload([__name__])
    return context


_CONTEXT: Any = None
_CONTEXT_LOCK = threading.Lock()


def call_in_process(fn: Callable[..., Any], job: Job, timeout: float | None) -> ChildOutcome:
    """Run `fn` (found again in the child by its module and name) on the job's payload in a
    child process; at `timeout`, SIGTERM, then SIGKILL after KILL_GRACE_SECONDS."""
    global _CONTEXT
    with _CONTEXT_LOCK:
        if _CONTEXT is None:
            _CONTEXT = _context()
        context = _CONTEXT
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_child_main,
        args=(
            fn.__module__,
            fn.__qualname__,
            (job.id, job.type, job.payload, job.attempts, job.shown_max_attempts),
            sender,
        ),
        name=f"tickq-{job.type}",
        daemon=True,
    )
    process.start()
    sender.close()  # the child holds the only writer: its exit is the pipe's end
    try:
        if not receiver.poll(timeout):
            _stop(process)
            return ChildOutcome(timed_out=True, exit_code=process.exitcode)
        try:
            reply: ChildOutcome = receiver.recv()
        except EOFError:  # the child died without a word (a crash, os._exit, a kill)
            process.join()
            return ChildOutcome(
                error_type="ChildProcessError",
                error=f"the handler's process exited with code {process.exitcode}",
                exit_code=process.exitcode,
            )
        process.join()
        return reply
    finally:
        receiver.close()
        if process.is_alive():
            _stop(process)
        process.close()


def _stop(process: Any) -> None:
    process.terminate()
    process.join(KILL_GRACE_SECONDS)
    if process.is_alive():
        process.kill()
        process.join()


def _child_main(module: str, qualname: str, job: tuple[Any, ...], sender: Connection) -> None:
    """The child: import the handler, call it, send back its JSON result or its error."""
    from queue_core.errors import RetryAfter

    try:
        fn = getattr(importlib.import_module(module), qualname)
        result = fn(ChildJob(*job))
        reply = ChildOutcome(result_json=json.dumps(result, allow_nan=False))
    except RetryAfter as exc:
        reply = ChildOutcome(error_type="RetryAfter", error=str(exc), retry_after=exc.seconds)
    except BaseException as exc:  # every failure goes back to the runner, which judges it
        reply = ChildOutcome(error_type=_kind(exc), error=str(exc))
    sender.send(reply)
    sender.close()


def _kind(exc: BaseException) -> str:
    """The exception's name, PermanentError for any of its subclasses (the runner's verdict
    depends on it)."""
    from queue_core.errors import PermanentError

    return "PermanentError" if isinstance(exc, PermanentError) else type(exc).__name__


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to its end from synchronous code: on a loop of its own, in a thread of
    its own when this thread already runs a loop (the runner called from async code, or
    from a test framework's loop), where asyncio.run would refuse."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(1, thread_name_prefix="tickq-async") as pool:
        return pool.submit(asyncio.run, coroutine).result()
