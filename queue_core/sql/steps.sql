-- Named statements of durable steps (queue_core/step_store.py), loaded with queries.sql.
-- Tables and the columns on tickq.jobs are in queue_core/schema/tables.sql.

-- name: job_durable_load
-- The durable state of a running job, read once when its handler first uses a step: stored
-- steps and signals, resumes, what its last suspension waited for, and the database clock.
-- Fenced by the lease token: no row means the lease is lost.
select j.resumes, j.wait_kind, j.wait_name, j.wait_until,
       coalesce(%(now)s::timestamptz, now()),
       (select coalesce(jsonb_object_agg(s.name, s.result), '{}'::jsonb)
        from tickq.job_steps s where s.job_id = j.id),
       (select coalesce(sum(s.size), 0) from tickq.job_steps s where s.job_id = j.id),
       (select coalesce(jsonb_object_agg(g.name, g.payload), '{}'::jsonb)
        from tickq.job_signals g where g.job_id = j.id),
       (select coalesce(sum(g.size), 0) from tickq.job_signals g where g.job_id = j.id)
from tickq.jobs j
where j.id = %(id)s and j.lease_token = %(lease_token)s and j.status = 'running';

-- name: job_steps_insert
-- Store one completed step, only while the job runs under the given lease token.
-- FOR SHARE holds off a reclaim or a new claim until this insert commits: the insert of a
-- stale worker either sees the new token and stores nothing, or commits before the row
-- moves on, so the load of the next attempt sees it. The primary key keeps one result per name.
with holder as (
    select id
    from tickq.jobs
    where id = %(id)s and lease_token = %(lease_token)s and status = 'running'
    for share
)
insert into tickq.job_steps (job_id, name, result, size, finished_at)
select holder.id, %(name)s, %(result)s::jsonb, %(size)s, coalesce(%(now)s::timestamptz, now())
from holder
on conflict (job_id, name) do nothing
returning finished_at;

-- name: jobs_suspend
-- Leave the worker: back to queued at the wake time, the attempt given back, steps kept,
-- resumes + 1. Fenced by the lease token; a job asked to cancel is left to the runner.
-- `signals` is read from the row being updated: a signal committed while this statement
-- waited for the row lock is seen (see tickq.jobs.signals), so the job wakes at once.
with clock as materialized (
    -- The wake time: given, or `delay` seconds from now on the database clock.
    select coalesce(%(now)s::timestamptz, now()) as now,
           coalesce(%(wait_until)s::timestamptz,
                    coalesce(%(now)s::timestamptz, now())
                    + %(delay)s::float8 * interval '1 second') as wake
)
update tickq.jobs j
set status = 'queued',
    attempts = j.attempts - 1,
    resumes = coalesce(j.resumes, 0) + 1,
    run_after = case when %(wait_kind)s = 'signal' and %(wait_name)s::text = any(j.signals)
                     then clock.now else clock.wake end,
    wait_kind = %(wait_kind)s,
    wait_name = %(wait_name)s::text,
    wait_until = clock.wake,
    lease_until = null,
    lease_token = null,
    updated_at = clock.now
from clock
where j.id = %(id)s and j.lease_token = %(lease_token)s and j.status = 'running'
  and not j.cancel_requested
returning j.run_after, j.wait_until;

-- name: job_signals_send
-- Keep a signal for a live job and wake it when it waits for that name. The job row is
-- locked first and written (its `signals`), so a suspension racing this signal either
-- commits first and is woken here, or waits for this commit and sees the name.
-- Returns the status of the job, whether the name was taken, the signal bytes and count it holds, whether
-- this signal was kept and whether it woke the job; no row: no such job (or one of another user).
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), job as materialized (
    select id, status from tickq.jobs where id = %(id)s for update
), held as materialized (
    select coalesce(sum(size), 0) as bytes, coalesce(bool_or(name = %(name)s), false) as taken,
           count(*) as held
    from tickq.job_signals where job_id = %(id)s
), sent as (
    insert into tickq.job_signals (job_id, name, payload, size, sent_at)
    select job.id, %(name)s, %(payload)s::jsonb, %(size)s, clock.now
    from job, held, clock
    where job.status not in ('succeeded', 'dead', 'cancelled')
      and not held.taken and held.bytes + %(size)s <= %(max_bytes)s
      and held.held < %(max_signals)s
    -- The same name sent concurrently: the later one finds the key taken and keeps none.
    on conflict (job_id, name) do nothing
    returning job_id
), woken as (
    update tickq.jobs j
    set signals = array_append(coalesce(j.signals, '{}'::text[]), %(name)s::text),
        run_after = case when j.status in ('queued', 'retrying') and j.wait_kind = 'signal'
                              and j.wait_name = %(name)s::text
                         then least(j.run_after, clock.now) else j.run_after end,
        updated_at = clock.now
    from sent, clock
    where j.id = sent.job_id
    returning j.status in ('queued', 'retrying') and j.wait_kind = 'signal'
              and j.wait_name = %(name)s::text as woke
)
select job.status, held.taken, held.bytes, held.held, exists (select from sent),
       coalesce((select woke from woken), false)
from job, held;

-- name: job_durable_show
-- What the views of one job show of its durable side (tickq.job_durable: resumes, wait,
-- how its handler ran it, steps and signals by name, time and size, not results). No
-- row: no such job (or one of another user).
select status, resumes, wait_kind, wait_name, wait_until, batch_id, completed_in_transaction,
       steps, signals
from tickq.job_durable(%(id)s::uuid);

-- name: job_durable_clear
-- Forget the steps, signals and wait of a finished job, before a fresh retry sends it back.
with target as materialized (
    select id from tickq.jobs
    where id = %(id)s and status in ('dead', 'cancelled')
    for update
), steps as (
    delete from tickq.job_steps s using target where s.job_id = target.id
), signals as (
    delete from tickq.job_signals g using target where g.job_id = target.id
)
update tickq.jobs j
set resumes = null, wait_kind = null, wait_name = null, wait_until = null, signals = null
from target
where j.id = target.id
returning j.id;
