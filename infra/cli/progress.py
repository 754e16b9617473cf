"""Progress on the terminal for long commands: `tickq work`'s live status line and
`tickq prune`'s bar. Both show only when stderr is a terminal and output is for humans;
piped or with --json, nothing is drawn.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.text import Text

from queue_core.runner.runner import TickReport

# Jobs per second are averaged over this many seconds of recent ticks.
RATE_WINDOW_SECONDS = 10.0


class WorkStatus:
    """What a worker has done so far, as one line: jobs/s, running, failures."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.total = TickReport()
        self.started = clock()
        self._finished: deque[tuple[float, int]] = deque([(self.started, 0)])
        self._lock = threading.Lock()

    def add(self, report: TickReport) -> None:
        """Count a tick's outcomes (called from the worker's thread)."""
        with self._lock:
            self.total.add(report)
            self._finished.append((self.clock(), finished(self.total)))

    def rate(self) -> float:
        """Jobs finished per second over the last RATE_WINDOW_SECONDS."""
        now = self.clock()
        with self._lock:
            while len(self._finished) > 1 and self._finished[1][0] <= now - RATE_WINDOW_SECONDS:
                self._finished.popleft()
            since, before = self._finished[0]
            done = finished(self.total)
        span = max(now - since, 1e-9)
        return (done - before) / span if done > before else 0.0

    def line(self) -> str:
        t = self.total
        running = max(0, t.claimed - finished(t) - t.lost_leases)
        failures = t.retried + t.dead
        # Threads of handlers stopped at their timeout that still run (a gauge), when any.
        abandoned = f"abandoned {t.abandoned_handlers}  " if t.abandoned_handlers else ""
        return (
            f"{self.rate():.1f} jobs/s  running {running}  succeeded {t.succeeded}  "
            f"failures {failures} ({t.retried} retried, {t.dead} dead)  {abandoned}"
            f"up {self.clock() - self.started:.0f} s"
        )

    def __rich__(self) -> Text:
        return Text(self.line(), style="dim")


def finished(report: TickReport) -> int:
    """Jobs whose attempt ended, whatever the outcome."""
    return report.succeeded + report.retried + report.dead + report.snoozed + report.cancelled


@contextmanager
def live_status(console: Console, status: WorkStatus, *, shown: bool) -> Iterator[None]:
    """Redraw `status` on one line of `console` twice a second while the block runs."""
    if not shown:
        yield
        return
    with Live(status, console=console, refresh_per_second=2, transient=False):
        yield


@contextmanager
def progress_bar(
    console: Console, label: str, total: int, *, shown: bool
) -> Iterator[Callable[[int], None]]:
    """A bar of `total` steps on `console`; yields the function that advances it."""
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True, disable=not shown) as progress:
        task = progress.add_task(label, total=total)
        yield lambda n: progress.advance(task, n)
