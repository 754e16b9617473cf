"""A backend terminated in the middle of a statement, for real: the statement waits on a
lock held here, and the backend is terminated while it waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.conftest import Connect


@contextmanager
def terminated_while_writing_live_jobs(connect: Connect, pid: int) -> Iterator[threading.Event]:
    """Lock tickq.jobs_live against writes; once backend `pid` waits on that lock (its
    statement has started), terminate the backend, then release the lock. Yields an event
    set when the backend was terminated."""
    locker, admin = connect(), connect()
    locker.execute("begin")
    locker.execute("lock table tickq.jobs_live in exclusive mode")
    terminated, leaving = threading.Event(), threading.Event()

    def terminate_the_waiting_backend() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not leaving.is_set():
            waiting = admin.execute(
                "select wait_event_type = 'Lock' from pg_stat_activity where pid = %s", (pid,)
            ).fetchone()
            if waiting == (True,):
                admin.execute("select pg_terminate_backend(%s)", (pid,))
                terminated.set()
                break
            time.sleep(0.01)
        locker.execute("rollback")

    watcher = threading.Thread(target=terminate_the_waiting_backend, daemon=True)
    watcher.start()
    try:
        yield terminated
    finally:
        leaving.set()
        watcher.join()
