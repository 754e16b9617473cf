"""How many jobs the streaming loop holds claimed beyond its handler threads: enough to
cover a few statements' round trips at the calls' pace, within the wait a claimed job may
have and a bound in batches, whatever the pace."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from queue_core.runner.stream import (
    AHEAD_BATCHES,
    AHEAD_JOBS,
    AHEAD_MAX_BATCHES,
    STATEMENTS_AHEAD,
    Loop,
)


def loop(concurrency: int, batch_size: int, call: float | None, statement: float) -> Loop:
    runner: Any = SimpleNamespace(concurrency=concurrency, batch_size=batch_size)
    held = Loop(runner, rule=None, stream=None)  # type: ignore[arg-type]  # unused here
    held.call_seconds, held.statement_seconds, held.wait_limit = call, statement, 1.0
    return held


def test_nothing_is_held_ahead_before_a_call_has_shown_its_pace() -> None:
    assert loop(4, 4, None, 0.005)._ahead() == 0


def test_quick_calls_hold_at_least_four_batches_or_64_jobs() -> None:
    assert loop(4, 4, 0.001, 0.0)._ahead() == max(AHEAD_BATCHES * 4, AHEAD_JOBS) == 64
    assert loop(16, 100, 0.001, 0.0)._ahead() == AHEAD_BATCHES * 100


def test_long_statements_hold_enough_to_cover_three_of_them() -> None:
    # 16 threads of 1 ms calls start 16,000 a second; three 8 ms statements cover 384.
    held = loop(16, 16, 0.001, 0.008)._ahead()
    assert held == min(int(STATEMENTS_AHEAD * 0.008 * 16_000), AHEAD_MAX_BATCHES * 16) == 256


def test_calls_of_microseconds_hold_no_more_than_sixteen_batches() -> None:
    assert loop(4, 10, 1e-6, 0.05)._ahead() == AHEAD_MAX_BATCHES * 10
    assert loop(4, 1, 0.0, 0.05)._ahead() == AHEAD_JOBS


def test_slow_calls_hold_only_what_starts_within_the_wait() -> None:
    # 4 threads of 1 s calls start 4 a second: a job claimed ahead waits at most a second.
    assert loop(4, 10, 1.0, 0.005)._ahead() == 4
    assert loop(4, 10, 10.0, 0.005)._ahead() == 0
