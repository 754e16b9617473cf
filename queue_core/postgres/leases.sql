-- What a lease holder and the reclaim do: fenced progress and lease extension, the reclaim,
-- and settling what finished parents released (queue_core/postgres/leases.py).
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

-- name: jobs_reclaim
-- Return jobs whose lease expired to retrying (a failed attempt, with backoff), or to dead
-- when their attempts are used up, checking and writing in one statement. A saga it would
-- end with undos owed is sent back at once with its compensation recorded instead. Holds
-- on flow keys that have ended are deleted on the way (unheld_keys).
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), expired as materialized (
    -- SKIP LOCKED: a row locked right now is being finished by its worker; leave it to them.
    -- What decides the job's fate is read here, from the row as locked: a cancel that
    -- committed after this statement began is in it, where another read of tickq.jobs (the
    -- statement's snapshot) would miss it and retry a job asked to cancel.
    select id, cancel_requested, attempts, max_attempts
    from tickq.jobs, clock
    where status = 'running' and lease_until <= clock.now
    order by lease_until
    limit %(limit)s
    for update of jobs skip locked
), owed as materialized (
    -- A job this reclaim would end (asked to cancel, or its last attempt) that owes undos
    -- (tickq.job_compensation_spare: null when its compensation has begun already). Only
    -- those are looked up: a job with attempts left pays one comparison.
    select j.id, j.cancel_requested, j.attempts, j.max_attempts,
           case when j.cancel_requested or j.attempts >= j.max_attempts
                then tickq.job_compensation_spare(j.id) else 0 end as spare
    from expired j
), decided as (
    -- A saga that owes undos goes back to run them at once (its handler compensates, then
    -- it ends as it was to end here); a compensating one's cancel is its compensation's.
    select o.id, o.spare,
           case when o.spare > 0 then 'retrying'
                when o.cancel_requested and o.spare is not null then 'cancelled'
                when o.attempts >= o.max_attempts then 'dead'
                else 'retrying' end as status,
           case when o.cancel_requested and o.spare is not null then 'cancelled while running'
                else 'lease expired' end as error,
           case when o.cancel_requested then 'cancelled' else 'dead' end as ends
    from owed o
), reclaimed as (
    update tickq.jobs j
    set status = d.status,
        error = d.error,
        errors = tickq.error_history(j.errors, jsonb_build_object(
            'attempt', j.attempts, 'at', clock.now, 'error', d.error)),
        run_after = case when d.spare > 0 then clock.now
                         when d.status = 'retrying'
                         then clock.now + tickq.backoff_seconds(
                             j.attempts, j.backoff_base, j.backoff_factor, j.backoff_max,
                             j.backoff_jitter) * interval '1 second'
                         else j.run_after end,
        max_attempts = case when d.spare > 0 then greatest(j.max_attempts, j.attempts + d.spare)
                            else j.max_attempts end,
        -- What the views show of it: the max_attempts declared, the attempts counted so far.
        declared_max_attempts = coalesce(j.declared_max_attempts,
                                         case when d.spare > 0 then j.max_attempts end),
        compensation_attempts = coalesce(j.compensation_attempts,
                                         case when d.spare > 0 then j.attempts end),
        lease_until = null,
        lease_token = null,
        cancel_requested = false,
        updated_at = clock.now,
        finished_at = case when d.status <> 'retrying' then clock.now end
    from decided d, clock
    where j.id = d.id and j.status in ('waiting', 'queued', 'running', 'retrying')
    returning j.id, j.queue, j.type, j.user_id, j.status, j.payload, j.idempotency_key,
        j.attempts, j.max_attempts, j.priority, j.run_after, j.lease_until, j.lease_token,
        j.progress, j.result, j.error, j.errors, j.lease_seconds, j.backoff_base,
        j.backoff_factor, j.backoff_max, j.backoff_jitter, j.cancel_requested, j.created_at,
        j.updated_at, j.started_at, j.finished_at, j.group_key, j.has_children, j.owner_priority,
        j.snoozes, j.timeout_seconds, j.wait_kind, j.flow_keys, j.declared_max_attempts,
        j.compensation_attempts
), begun as (
    select case when count(*) > 0
                then tickq.job_compensations_record(array_agg(d.id), array_agg(d.ends),
                                                    array_agg(d.error), min(clock.now))
           end as compensations
    from decided d, clock
    where d.spare > 0
), unheld_keys as (
    -- Holds past their end, deleted at most %(limit)s at a time, so the table keeps only
    -- live holds (what `tickq flow list` and the console show, and what the claims' guard
    -- asks of it). SKIP LOCKED: a hold being renewed right now is left to the next pass.
    delete from tickq.flow_holds h
    where h.key in (select o.key from tickq.flow_holds o
                    where o.until <= (select now from clock)
                    order by o.until
                    limit %(limit)s
                    for update skip locked)
), settled as (
    -- A job that went dead or cancelled here takes its waiting descendants with it.
    select case when count(*) > 0
                then tickq.jobs_settle(array_agg(r.id), array_agg(r.status), min(clock.now))
           end as children
    from reclaimed r, clock
    where r.has_children and r.status <> 'retrying'
)
-- The job columns as reclaimed returns them, by name, once: a second list would take the
-- statement past psycopg's query cache (tests/integration/test_queries.py).
select reclaimed.* from reclaimed cross join settled cross join begun;

-- name: jobs_extend_lease
-- Push a running job's lease out; fenced by its lease token.
update tickq.jobs
set lease_until = coalesce(%(now)s::timestamptz, now()) + %(seconds)s * interval '1 second',
    updated_at = coalesce(%(now)s::timestamptz, now())
where id = %(id)s and lease_token = %(lease_token)s and status = 'running'
returning lease_until, cancel_requested;

-- name: jobs_report_progress
-- Record a running job's progress; fenced by its lease token.
update tickq.jobs
set progress = %(progress)s::jsonb,
    updated_at = coalesce(%(now)s::timestamptz, now())
where id = %(id)s and lease_token = %(lease_token)s and status = 'running'
returning cancel_requested;

-- name: jobs_settle_pending
-- One short transaction of settling what statements finishing parents left (see
-- tickq.jobs_settle_pending): the children settled, 0 when none is left.
select tickq.jobs_settle_pending(%(budget)s, %(now)s::timestamptz);

-- name: job_parent_results
-- The results of a job's parents, for job.parent_results (read when a handler asks for it).
select d.parent_id, p.result
from tickq.job_dependencies d
join tickq.jobs p on p.id = d.parent_id
where d.child_id = %(id)s;

-- name: flow_hold_fenced
-- flow_hold from a running handler (job.hold_flow): only while the job still holds its
-- lease, so a handler whose job was taken over changes nothing.
insert into tickq.flow_holds as h (key, until, set_at)
select %(key)s, coalesce(%(now)s::timestamptz, now()) + %(seconds)s * interval '1 second',
       coalesce(%(now)s::timestamptz, now())
where exists (select from tickq.jobs j
              where j.id = %(id)s and j.lease_token = %(lease_token)s
                and j.status = 'running')
on conflict (key) do update
    set until = greatest(h.until, excluded.until), set_at = greatest(h.set_at, excluded.set_at)
returning key, until;
