-- The operator console: paused queues, a small history of queue depth for charts, the
-- index behind the failure counts, and the narrow functions operators call.

-- A paused queue's jobs are not claimed; enqueue still works. One row per paused queue,
-- saying who paused it and when. Workers read the whole (tiny) table every few seconds.
create table tickq.queue_pauses (
    queue     text primary key,
    paused_by text not null,
    paused_at timestamptz not null default now(),
    reason    text,

    constraint queue_pauses_reason_check check (reason is null or length(reason) <= 500)
);

grant select, insert, update, delete on tickq.queue_pauses to tickq_worker;
-- A claim on an application login (a user's own jobs) reads which queues are paused too.
grant select (queue) on tickq.queue_pauses to tickq_app;

-- Queue depth over time, sampled by MaintenanceFunction (and `tickq maintain`) from the
-- counts it already reads for its metrics. Kept for a short, fixed time (the sampling
-- statement deletes older rows), so the table stays a few thousand rows.
create table tickq.queue_depth_samples (
    sampled_at              timestamptz not null,
    queue                   text not null,
    depth                   bigint not null,
    running                 bigint not null,
    oldest_runnable_seconds double precision,

    primary key (sampled_at, queue)
);

grant select, insert, delete on tickq.queue_depth_samples to tickq_worker;

-- Failed attempts per minute: finished jobs that had failures. Partial on errors, so a job
-- that never fails never enters it; succeeded and dead counts use jobs_finished_idx.
create index jobs_failed_finished_idx on tickq.jobs (finished_at)
    where status in ('succeeded', 'dead', 'cancelled') and errors <> '[]'::jsonb;

-- Jobs waiting to retry, by the time of their last failure; only failing jobs enter it.
create index jobs_retrying_idx on tickq.jobs (updated_at) where status = 'retrying';

-- Operators act through the functions below; tickq_operator may call them and touch no
-- row otherwise. The role also comes with the API's hardening; created here if missing.
do $$
begin
    if not exists (select from pg_roles where rolname = 'tickq_operator') then
        create role tickq_operator nologin;
    end if;
exception when duplicate_object or unique_violation then
    null;  -- another database on this cluster created it at the same moment
end $$;

grant usage on schema tickq to tickq_operator;

-- Pause a queue; pausing a paused queue keeps who paused it first and when.
create function tickq.queue_pause(p_queue text, p_by text, p_reason text, p_now timestamptz)
    returns table (queue text, paused_by text, paused_at timestamptz, reason text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
insert into tickq.queue_pauses as p (queue, paused_by, paused_at, reason)
values (p_queue, p_by, coalesce(p_now, now()), p_reason)
on conflict on constraint queue_pauses_pkey do update set queue = p.queue
returning p.queue, p.paused_by, p.paused_at, p.reason
$$;

-- Resume a queue; no row when it was not paused.
create function tickq.queue_resume(p_queue text)
    returns table (queue text, paused_by text, paused_at timestamptz, reason text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
delete from tickq.queue_pauses p where p.queue = p_queue
returning p.queue, p.paused_by, p.paused_at, p.reason
$$;

create function tickq.queue_pauses_list()
    returns table (queue text, paused_by text, paused_at timestamptz, reason text)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select p.queue, p.paused_by, p.paused_at, p.reason from tickq.queue_pauses p order by p.queue
$$;

-- Succeeded, failed (and retried) and dead per bucket of p_bucket_seconds since p_since.
-- Succeeded and dead come from jobs_finished_idx; failures from the error history of jobs
-- that failed: finished ones through jobs_failed_finished_idx, retrying ones through
-- jobs_retrying_idx, running ones through jobs_lease_idx. A dead job's last failure counts
-- as dead, not as retried.
create function tickq.throughput(
    p_since timestamptz, p_bucket_seconds integer, p_queue text, p_now timestamptz)
    returns table (bucket timestamptz, succeeded bigint, failed bigint, dead bigint)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
with buckets as (
    select b as bucket
    from generate_series(
        to_timestamp(floor(extract(epoch from p_since) / p_bucket_seconds) * p_bucket_seconds),
        coalesce(p_now, now()), make_interval(secs => p_bucket_seconds)) b
), finished as (
    select j.status, j.finished_at as at
    from tickq.jobs j
    where j.status in ('succeeded', 'dead') and j.finished_at >= p_since
      and (p_queue is null or j.queue = p_queue)
), failing as (
    select j.status, j.errors from tickq.jobs j
    where j.status in ('succeeded', 'dead', 'cancelled') and j.errors <> '[]'::jsonb
      and j.finished_at >= p_since and (p_queue is null or j.queue = p_queue)
    union all
    select j.status, j.errors from tickq.jobs j
    where j.status = 'retrying' and j.updated_at >= p_since
      and (p_queue is null or j.queue = p_queue)
    union all
    select j.status, j.errors from tickq.jobs j
    where j.status = 'running' and j.lease_until > '-infinity' and j.errors <> '[]'::jsonb
      and (p_queue is null or j.queue = p_queue)
), failures as (
    select (e.entry ->> 'at')::timestamptz as at
    from failing f, jsonb_array_elements(f.errors) with ordinality as e (entry, n)
    where not (f.status = 'dead' and e.n = jsonb_array_length(f.errors))
), events as (
    select status, at from finished
    union all
    select 'failed', at from failures where at >= p_since
)
select b.bucket,
       count(*) filter (where e.status = 'succeeded'),
       count(*) filter (where e.status = 'failed'),
       count(*) filter (where e.status = 'dead')
from buckets b
left join events e
    on e.at >= b.bucket and e.at < b.bucket + make_interval(secs => p_bucket_seconds)
group by b.bucket
order by b.bucket
$$;

-- Depth samples since p_since, per queue (all queues when p_queue is null).
create function tickq.depth_history(p_since timestamptz, p_queue text)
    returns table (sampled_at timestamptz, queue text, depth bigint, running bigint,
                   oldest_runnable_seconds double precision)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select s.sampled_at, s.queue, s.depth, s.running, s.oldest_runnable_seconds
from tickq.queue_depth_samples s
where s.sampled_at >= p_since and (p_queue is null or s.queue = p_queue)
order by s.sampled_at, s.queue
$$;

-- Every user's jobs for the operator list: what identifies a job and how it went, never
-- its payload or result. Newest first, a page after the (created_at, id) cursor.
create function tickq.operator_jobs(
    p_statuses text[], p_types text[], p_queues text[], p_groups text[], p_error text,
    p_created_from timestamptz, p_created_to timestamptz,
    p_after_created timestamptz, p_after_id uuid, p_limit integer)
    returns table (id uuid, queue text, type text, user_id uuid, group_key text, status text,
                   attempts integer, max_attempts integer, priority integer,
                   progress jsonb, error text, run_after timestamptz,
                   created_at timestamptz, updated_at timestamptz, finished_at timestamptz)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select j.id, j.queue, j.type, j.user_id, j.group_key, j.status, j.attempts, j.max_attempts,
       j.priority, j.progress, j.error, j.run_after, j.created_at, j.updated_at,
       j.finished_at
from tickq.jobs j
where (p_statuses is null or j.status = any(p_statuses))
  and (p_types is null or j.type = any(p_types))
  and (p_queues is null or j.queue = any(p_queues))
  and (p_groups is null or j.group_key = any(p_groups))
  and (p_error is null or strpos(lower(j.error), lower(p_error)) > 0)
  and (p_created_from is null or j.created_at >= p_created_from)
  and (p_created_to is null or j.created_at < p_created_to)
  and (p_after_created is null or (j.created_at, j.id) < (p_after_created, p_after_id))
order by j.created_at desc, j.id desc
limit p_limit
$$;

-- One job of any user for the operator's detail view: operator_jobs' columns and the error
-- history, never the payload or result.
create function tickq.operator_job(p_id uuid)
    returns table (id uuid, queue text, type text, user_id uuid, group_key text,
                   status text, attempts integer, max_attempts integer, priority integer,
                   progress jsonb, error text, errors jsonb, run_after timestamptz,
                   lease_until timestamptz, created_at timestamptz, updated_at timestamptz,
                   started_at timestamptz, finished_at timestamptz)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select j.id, j.queue, j.type, j.user_id, j.group_key, j.status, j.attempts, j.max_attempts,
       j.priority, j.progress, j.error, j.errors, j.run_after, j.lease_until, j.created_at,
       j.updated_at, j.started_at, j.finished_at
from tickq.jobs j
where j.id = p_id
$$;

-- Send dead or cancelled jobs of any user back to the queue, as jobs_retry does by id, and
-- say per requested id what happened: retried, not found, not retryable (with its status),
-- parents unfinished (a parent has not succeeded, so it must not run yet), or key taken (a
-- live job holds its idempotency key).
create function tickq.operator_retry(p_ids uuid[], p_now timestamptz)
    returns table (id uuid, status text, outcome text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
with requested as (
    select distinct r.id from unnest(p_ids) as r (id)
), candidates as (
    select j.id, j.idempotency_key, j.user_id, j.finished_at
    from tickq.jobs j
    where j.id in (select r.id from requested r) and j.status in ('dead', 'cancelled')
    for update skip locked
), blocked as (
    select c.id from candidates c
    where exists (select from tickq.job_dependencies d
                  join tickq.jobs p on p.id = d.parent_id
                  where d.child_id = c.id and p.status <> 'succeeded')
), chosen as (
    select c.id from candidates c
    where c.id not in (select b.id from blocked b)
      and (c.idempotency_key is null
       or (not exists (select from tickq.jobs o
                       where o.idempotency_key = c.idempotency_key
                         and o.user_id is not distinct from c.user_id
                         and o.status not in ('dead', 'cancelled'))
           and not exists (select from candidates n
                           where n.idempotency_key = c.idempotency_key
                             and n.user_id is not distinct from c.user_id
                             and (n.finished_at, n.id) > (c.finished_at, c.id))))
), retried as (
    update tickq.jobs j
    set status = 'queued',
        attempts = 0,
        run_after = coalesce(p_now, now()),
        cancel_requested = false,
        finished_at = null,
        updated_at = coalesce(p_now, now())
    from chosen
    where j.id = chosen.id
    returning j.id, j.status
)
select r.id,
       coalesce(t.status, j.status),
       case when t.id is not null then 'retried'
            when j.id is null then 'not found'
            when j.status not in ('dead', 'cancelled') then 'not retryable'
            when b.id is not null then 'parents unfinished'
            else 'key taken' end
from requested r
left join retried t on t.id = r.id
left join blocked b on b.id = r.id
left join tickq.jobs j on j.id = r.id
order by r.id
$$;

-- Cancel jobs of any user, as jobs_cancel does: jobs not yet running at once (with their
-- waiting descendants, tickq.jobs_settle), running ones asked to stop at their next
-- heartbeat; per requested id what happened.
create function tickq.operator_cancel(p_ids uuid[], p_now timestamptz)
    returns table (id uuid, status text, outcome text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
with requested as (
    select distinct r.id from unnest(p_ids) as r (id)
), cancelled as (
    update tickq.jobs j
    set status = case when j.status = 'running' then j.status else 'cancelled' end,
        cancel_requested = (j.status = 'running'),
        finished_at = case when j.status = 'running' then null
                           else coalesce(p_now, now()) end,
        updated_at = coalesce(p_now, now())
    where j.id in (select r.id from requested r)
      and j.status in ('waiting', 'queued', 'retrying', 'running')
    returning j.id, j.status, j.cancel_requested, j.has_children
), settled as (
    select case when count(*) > 0
                then tickq.jobs_settle(array_agg(c.id), array_agg(c.status),
                                       coalesce(p_now, now()))
           end as children
    from cancelled c
    where c.has_children and c.status = 'cancelled'
)
select r.id,
       coalesce(c.status, j.status),
       case when c.cancel_requested then 'asked to stop'
            when c.id is not null then 'cancelled'
            when j.id is null then 'not found'
            else 'not cancellable' end
from requested r
cross join settled
left join cancelled c on c.id = r.id
left join tickq.jobs j on j.id = r.id
order by r.id
$$;

-- How many dead jobs of these types and queues exist (every type or queue when null).
create function tickq.operator_count_dead(p_types text[], p_queues text[])
    returns bigint
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select count(*) from tickq.jobs j
where j.status = 'dead'
  and (p_types is null or j.type = any(p_types))
  and (p_queues is null or j.queue = any(p_queues))
$$;

-- Retry every dead job of these types and queues, only if there are exactly p_expected of
-- them (the count the operator confirmed); otherwise nothing changes and SQLSTATE TQ409
-- reports the current count in its detail.
create function tickq.operator_retry_dead(
    p_types text[], p_queues text[], p_expected bigint, p_now timestamptz)
    returns table (id uuid, status text, outcome text)
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_ids uuid[];
begin
    select array_agg(j.id) into v_ids
    from (select j.id from tickq.jobs j
          where j.status = 'dead'
            and (p_types is null or j.type = any(p_types))
            and (p_queues is null or j.queue = any(p_queues))
          limit p_expected + 1
          for update) j;
    if coalesce(cardinality(v_ids), 0) <> p_expected then
        raise exception 'tickq: the dead jobs changed since they were counted'
            using errcode = 'TQ409',
                  detail = tickq.operator_count_dead(p_types, p_queues)::text;
    end if;
    return query select * from tickq.operator_retry(v_ids, p_now);
end $$;

revoke all on function
    tickq.queue_pause(text, text, text, timestamptz), tickq.queue_resume(text),
    tickq.queue_pauses_list(), tickq.throughput(timestamptz, integer, text, timestamptz),
    tickq.depth_history(timestamptz, text),
    tickq.operator_jobs(text[], text[], text[], text[], text, timestamptz, timestamptz,
                        timestamptz, uuid, integer),
    tickq.operator_job(uuid),
    tickq.operator_retry(uuid[], timestamptz), tickq.operator_cancel(uuid[], timestamptz),
    tickq.operator_count_dead(text[], text[]),
    tickq.operator_retry_dead(text[], text[], bigint, timestamptz)
    from public;
grant execute on function
    tickq.queue_pause(text, text, text, timestamptz), tickq.queue_resume(text),
    tickq.queue_pauses_list(), tickq.throughput(timestamptz, integer, text, timestamptz),
    tickq.depth_history(timestamptz, text),
    tickq.operator_jobs(text[], text[], text[], text[], text, timestamptz, timestamptz,
                        timestamptz, uuid, integer),
    tickq.operator_job(uuid),
    tickq.operator_retry(uuid[], timestamptz), tickq.operator_cancel(uuid[], timestamptz),
    tickq.operator_count_dead(text[], text[]),
    tickq.operator_retry_dead(text[], text[], bigint, timestamptz)
    to tickq_operator, tickq_worker;
