"""A worker process of tests/integration/test_flow_workers.py: claims jobs until none is
left, and around each job's work counts the jobs of each of its keys at work in a probe
table (a handler starts after its claim commits and ends before its finish does, so the
count at work never exceeds what the database counts as running)."""

from __future__ import annotations

import sys
import time

import psycopg

from queue_core.model.jobs import Outcome, Status
from queue_core.postgres import PostgresStore

PROBE = "flow_probe"


def work(url: str) -> None:
    with (
        psycopg.connect(url, autocommit=True) as conn,
        psycopg.connect(url, autocommit=True) as probe,
    ):
        store = PostgresStore(conn)
        idle = 0
        while idle < 3:
            claimed = store.claim(limit=4)
            if not claimed:
                left = conn.execute(
                    "select count(*) from tickq.jobs where status in ('queued', 'retrying')"
                ).fetchone()
                idle = idle + 1 if left == (0,) else 0
                continue
            idle = 0
            outcomes = []
            for job in claimed:
                for key in job.flow_keys:
                    probe.execute(
                        f"update {PROBE} set n = n + 1, peak = greatest(peak, n + 1)"
                        " where key = %s",
                        (key,),
                    )
                time.sleep(0.002)  # the job's work: long enough for claims to overlap it
                for key in job.flow_keys:
                    probe.execute(f"update {PROBE} set n = n - 1 where key = %s", (key,))
                assert job.lease_token is not None
                outcomes.append(Outcome(job.id, job.lease_token, Status.SUCCEEDED))
            store.finish(outcomes)


if __name__ == "__main__":
    work(sys.argv[1])
