"""The raw-SQL ceiling: a minimal claim/ack loop on tickq's own table, no engine around it.

Same table, indexes and durability as tickq; the claim is the same SKIP LOCKED CTE (its
update probing the primary key by id array, the faster of the forms measured), the ack
one update by id array, and the Python per job is nothing. What tickq adds over this is the
price of its engine (rows mapped to Jobs, outcomes, fencing).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

import psycopg

from . import System, claim_ack_loop, tickq_side, timed_single_inserts

CLAIM = """
with picked as materialized (
    select id from tickq.jobs
    where status in ('queued', 'retrying') and queue = 'default' and run_after <= now()
    order by priority desc, run_after, created_at
    limit %(limit)s
    for update skip locked
)
update tickq.jobs j
set status = 'running', attempts = j.attempts + 1, lease_token = gen_random_uuid(),
    lease_until = now() + interval '30 seconds', started_at = now(), updated_at = now()
where j.id = any(array(select id from picked))
returning j.id, j.payload
"""
ACK = """
update tickq.jobs
set status = 'succeeded', lease_token = null, lease_until = null,
    finished_at = now(), updated_at = now()
where id = any(%(ids)s::uuid[]) and status = 'running'
"""
INSERT_ONE = "insert into tickq.jobs (type, payload) values ('noop', %(payload)s::jsonb)"
# Keys are claimed in tickq.job_keys first, and only the jobs whose key was won go in.
INSERT_MANY = """
with claimed as (
    insert into tickq.job_keys (idempotency_key, job_id)
    select k, gen_random_uuid() from unnest(%(keys)s::text[]) k
    on conflict (idempotency_key, user_id) do nothing
    returning job_id, idempotency_key
)
insert into tickq.jobs (id, type, idempotency_key)
select job_id, 'noop', idempotency_key from claimed
"""


def bulk_enqueue(url: str, n: int) -> float:
    run = secrets.token_hex(4)
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        for first in range(0, n, tickq_side.CHUNK):
            keys = [f"{run}-{i}" for i in range(first, min(n, first + tickq_side.CHUNK))]
            conn.execute(INSERT_MANY, {"keys": keys})
        return time.perf_counter() - started


def single_enqueue(url: str, n: int) -> float:
    return timed_single_inserts(url, n, INSERT_ONE)


def prepare_drain(url: str, batch: int, variant: str) -> Callable[[], int]:
    return claim_ack_loop(url, batch, CLAIM, ACK)


SYSTEM = System(
    name="raw-sql",
    install=tickq_side.install,
    bulk_enqueue=bulk_enqueue,
    single_enqueue=single_enqueue,
    prepare_drain=prepare_drain,
    drain_variants=("loop",),
    latency_worker=None,
    latency_producer=None,
)
