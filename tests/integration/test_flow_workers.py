"""Several worker processes drain jobs of a few busy flow keys: no key ever has more jobs at
work than its cap, and every job runs once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from queue_core.model.flow import flow_limit
from queue_core.model.validation import job_spec
from queue_core.policies.flow_limits import FlowLimits
from queue_core.postgres import PostgresStore
from tests.integration.flow_worker import PROBE

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 3
KEYS = {"shop:a": 2, "shop:b": 2, "shop:c": 2, "api:x": 1}


def test_no_key_ever_has_more_jobs_at_work_than_its_cap(conn, database_url):
    # Given caps per key and jobs of one or two keys each, some of no key at all
    limits = FlowLimits(conn)
    limits.set(flow_limit("shop:", max_running=2))
    limits.set(flow_limit("api:", max_running=1))
    conn.execute(f"drop table if exists {PROBE}")
    conn.execute(f"create table {PROBE} (key text primary key, n int not null, peak int not null)")
    conn.cursor().executemany(f"insert into {PROBE} values (%s, 0, 0)", [(k,) for k in KEYS])
    shops = ["shop:a", "shop:b", "shop:c"]
    specs = [
        job_spec("t", {"i": i}, flow_keys=[shops[i % 3], *(["api:x"] if i % 4 == 0 else [])])
        for i in range(90)
    ] + [job_spec("t", {"i": -i}) for i in range(10)]
    PostgresStore(conn).enqueue_many(specs)

    # When several worker processes drain them
    try:
        workers = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.integration.flow_worker", database_url], cwd=ROOT
            )
            for _ in range(WORKERS)
        ]
        codes = [w.wait(timeout=300) for w in workers]

        # Then each job ran once, and no key's jobs at work ever exceeded its cap
        assert codes == [0] * WORKERS
        states = conn.execute("select status, count(*) from tickq.jobs group by 1").fetchall()
        assert states == [("succeeded", 100)]
        peaks = dict(conn.execute(f"select key, peak from {PROBE}").fetchall())
        assert all(peaks[key] <= cap for key, cap in KEYS.items()), peaks
        assert all(peak >= 1 for peak in peaks.values())
    finally:
        conn.execute(f"drop table if exists {PROBE}")
