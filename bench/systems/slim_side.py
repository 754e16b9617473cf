"""The slim raw reference: a queue table of 8 columns and one partial index, drained by a
bare psycopg loop (claim a batch with FOR UPDATE SKIP LOCKED, then finish it).

What a queue costs when its table holds nothing but what a claim needs: the floor for any
Postgres queue on this server. Finished rows stay in place (status 'succeeded'), as tickq's
do until retention prunes them, so both keep the same kind of dead tuples behind them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg

from . import System, claim_ack_loop, timed_single_inserts

SCHEMA = """
create schema if not exists slim;
create table if not exists slim.jobs (
    id bigint generated always as identity primary key,
    queue text not null default 'default',
    status text not null default 'queued',
    payload jsonb not null default '{}',
    run_after timestamptz not null default now(),
    lease_until timestamptz,
    attempts integer not null default 0,
    created_at timestamptz not null default now()
);
create index if not exists jobs_claim_idx on slim.jobs (queue, run_after)
    where status = 'queued';
"""
CLAIM = """
with picked as materialized (
    select id from slim.jobs
    where status = 'queued' and queue = 'default' and run_after <= now()
    order by run_after
    limit %(limit)s
    for update skip locked
)
update slim.jobs j
set status = 'running', attempts = j.attempts + 1,
    lease_until = now() + interval '30 seconds'
where j.id = any(array(select id from picked))
returning j.id, j.payload
"""
FINISH = """
update slim.jobs set status = 'succeeded', lease_until = null
where id = any(%(ids)s::bigint[]) and status = 'running'
"""
INSERT_ONE = "insert into slim.jobs (payload) values (%(payload)s::jsonb)"
INSERT_MANY = "insert into slim.jobs (payload) select unnest(%(payloads)s::jsonb[])"
CHUNK = 1000


def install(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SCHEMA)


def bulk_enqueue(url: str, n: int) -> float:
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        for first in range(0, n, CHUNK):
            conn.execute(INSERT_MANY, {"payloads": ["{}"] * min(CHUNK, n - first)})
        return time.perf_counter() - started


def single_enqueue(url: str, n: int) -> float:
    return timed_single_inserts(url, n, INSERT_ONE)


def prepare_drain(url: str, batch: int, variant: str) -> Callable[[], int]:
    return claim_ack_loop(url, batch, CLAIM, FINISH)


SYSTEM = System(
    name="slim-raw",
    install=install,
    bulk_enqueue=bulk_enqueue,
    single_enqueue=single_enqueue,
    prepare_drain=prepare_drain,
    drain_variants=("loop",),
    latency_worker=None,
    latency_producer=None,
)
