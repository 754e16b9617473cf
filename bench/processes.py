"""Worker processes started together behind a barrier, so connection setup is not timed."""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable, Mapping
from typing import Any

# Spawn, not fork: a forked child would inherit the parent's open database sockets.
_CTX = mp.get_context("spawn")

Prepare = Callable[..., Callable[[], int]]


def _child(prepare: Prepare, args: tuple[Any, ...], ready: Any, go: Any, results: Any) -> None:
    try:
        run = prepare(*args)
        ready.put(None)
        go.wait()
        done = run()
        results.put(("ok", time.monotonic(), done))
    except BaseException as exc:
        ready.put(None)
        results.put(("error", time.monotonic(), f"{type(exc).__name__}: {exc}"))
        raise


def timed_in_processes(
    prepare: Prepare, args: tuple[Any, ...], processes: int
) -> tuple[float, int]:
    """Run `prepare(*args)()` in `processes` processes at once; (wall seconds, units done).

    `prepare` connects and returns the callable to time; all processes start it together
    and the clock stops when the last one finishes (CLOCK_MONOTONIC is system-wide).
    """
    ready, results, go = _CTX.Queue(), _CTX.Queue(), _CTX.Event()
    procs = [
        _CTX.Process(target=_child, args=(prepare, args, ready, go, results), daemon=True)
        for _ in range(processes)
    ]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.get(timeout=120)
    started = time.monotonic()
    go.set()
    outcomes = [results.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    errors = [detail for kind, _, detail in outcomes if kind == "error"]
    if errors:
        raise RuntimeError(f"benchmark worker failed: {errors[0]}")
    finished = max(at for _, at, _ in outcomes)
    return finished - started, sum(int(done) for _, _, done in outcomes)


def start_process(target: Callable[..., None], *args: Any) -> Any:
    """A daemon process (spawned) running `target(*args)`; the caller joins it."""
    proc = _CTX.Process(target=target, args=args, daemon=True)
    proc.start()
    return proc


def await_starts(expected: Any, started: Mapping[str, float], timeout: float = 120.0) -> None:
    """Block until the harness says how many latency jobs it committed, then until the
    worker has started that many (or `timeout` passes): a fixed grace period is too short
    for a slow peer on a loaded machine, and too long for a fast one."""
    want = expected.get()
    deadline = time.monotonic() + timeout
    while len(started) < want and time.monotonic() < deadline:
        time.sleep(0.02)


def new_queue() -> Any:
    return _CTX.Queue()
