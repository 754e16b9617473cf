-- Each rule once.
--
-- A job's rows in every table that hangs on it go the same way whether the job is deleted
-- (tickq.jobs_forget) or its day partition dropped (tickq.jobs_partition_drop), as
-- tickq.jobs_forget_all empties them: a deleted parent's settlement goes with it too.
--
-- The operator's cancel, retry, counts, group counts and job list are thin wrappers over
-- the store's one body of each (tickq.jobs_cancel, tickq.jobs_retry, and the new
-- tickq.jobs_stats, tickq.jobs_group_stats and tickq.jobs_search, which the store's
-- statements read too), instead of copies of it.

-- A deleted job takes the rows that hang on it (its key, steps, step tries, signals,
-- dependency edges, settlement, gate and workflow children), as foreign keys' cascades
-- would (a partitioned tickq.jobs cannot be referenced by id alone): one list of tables,
-- the same as tickq.jobs_forget_all and tickq.jobs_partition_drop empty
-- (tests/unit/test_job_tables.py holds the three to it). A statement trigger with the
-- deleted rows (jobs_forget, triggers.sql): one set-based delete per table and statement,
-- and nothing at all for statements that delete no job. Security definer, as a cascade:
-- the rows go whoever deleted the job. Key rows are found by key (keyless deleted jobs
-- match none).
create or replace function tickq.jobs_forget() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_keys k using gone g
    where k.idempotency_key = g.idempotency_key
      and k.user_id is not distinct from g.user_id
      and k.job_id = g.id;
    delete from tickq.job_steps s using gone g where s.job_id = g.id;
    delete from tickq.job_signals s using gone g where s.job_id = g.id;
    delete from tickq.job_dependencies d using gone g where d.child_id = g.id;
    delete from tickq.job_dependencies d using gone g where d.parent_id = g.id;
    delete from tickq.job_settlements x using gone g
    where x.parent_id = g.id and g.has_children;  -- only a parent has one
    delete from tickq.job_gates x using gone g where x.job_id = g.id;
    delete from tickq.job_step_tries t using gone g where t.job_id = g.id;
    delete from tickq.job_ids i using gone g where i.id = g.id;
    -- A workflow's children go with their parent (this trigger fires again for them; a
    -- statement trigger fires even when it deletes nothing, hence the test first).
    if exists (select from tickq.job_children k join gone g on g.id = k.parent_id) then
        delete from tickq.jobs c
        where c.id in (select k.child_id from tickq.job_children k join gone g
                       on g.id = k.parent_id);
    end if;
    delete from tickq.job_children k using gone g
    where k.parent_id = g.id or k.child_id = g.id;
    return null;
end $$;

-- Drop one day partition whose every job retention lets go (queue_core/retention.py decides
-- which), with the rows that hang on its jobs (their idempotency keys, steps, signals,
-- dependency edges, settlements and gates, as tickq.jobs_forget takes them), in one
-- transaction. Returns what went, by queue, type and status, for the pruning report (a row
-- of nulls when it was empty); nothing, and the partition stays, when one of its jobs is a
-- parent that an unfinished child still needs (the child reads its result when it runs).
create or replace function tickq.jobs_partition_drop(p_name text)
    returns table (queue text, type text, status text, n bigint)
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    set lock_timeout = '200ms'
    as $$
declare
    v_try    integer := 0;
    v_needed boolean;
begin
    if p_name !~ '^jobs_done_[0-9]{8}$' or to_regclass('tickq.' || p_name) is null then
        raise exception 'tickq: no day partition named %', p_name
            using errcode = 'invalid_parameter_value';
    end if;
    loop
        begin
            -- Nothing reads or writes the partition from here on: a child enqueued after a
            -- parent in it was checked would otherwise lose the parent's result.
            execute format('lock table tickq.%I in access exclusive mode', p_name);
            execute format(
                'select exists (select from tickq.%I j join tickq.job_dependencies d'
                ' on d.parent_id = j.id join tickq.jobs_live c on c.id = d.child_id'
                ' where j.has_children)', p_name) into strict v_needed;
            if v_needed then
                return;
            end if;
            -- One row per queue, type and status; one row of nulls for an empty partition.
            return query execute format(
                'select j.queue, j.type, j.status, count(*) from tickq.%I j'
                ' group by j.queue, j.type, j.status'
                ' union all select null, null, null, 0'
                ' where not exists (select from tickq.%I)', p_name, p_name);
            execute format('delete from tickq.job_keys k using tickq.%I j'
                           ' where k.idempotency_key = j.idempotency_key'
                           ' and k.user_id is not distinct from j.user_id'
                           ' and k.job_id = j.id', p_name);
            execute format('delete from tickq.job_steps s using tickq.%I j'
                           ' where s.job_id = j.id', p_name);
            execute format('delete from tickq.job_signals s using tickq.%I j'
                           ' where s.job_id = j.id', p_name);
            execute format('delete from tickq.job_dependencies d using tickq.%I j'
                           ' where d.child_id = j.id or d.parent_id = j.id', p_name);
            -- Only a parent has a settlement: its few rows, through jobs_done_parents_idx.
            execute format('delete from tickq.job_settlements x using tickq.%I j'
                           ' where x.parent_id = j.id and j.has_children', p_name);
            execute format('delete from tickq.job_gates x using tickq.%I j'
                           ' where x.job_id = j.id', p_name);
            execute format('delete from tickq.job_step_tries t using tickq.%I j'
                           ' where t.job_id = j.id', p_name);
            execute format('delete from tickq.job_children k using tickq.%I j'
                           ' where k.child_id = j.id or k.parent_id = j.id', p_name);
            execute format('delete from tickq.job_ids i using tickq.%I j'
                           ' where i.id = j.id', p_name);
            execute format('drop table tickq.%I', p_name);
            return;
        exception when lock_not_available or deadlock_detected then
            v_try := v_try + 1;
            if v_try >= 20 then
                raise;
            end if;
            perform pg_sleep(0.05 * v_try);
        end;
    end loop;
end $$;

-- Counts per queue, type and status, and the age of the oldest runnable job of each: the one
-- body of the store's stats (jobs_stats; row-level security keeps an application user to
-- its own jobs) and of tickq.operator_stats (every user's, for operators). Security invoker,
-- plain SQL without settings, so a statement that reads it is planned as if it were
-- written there.
create function tickq.jobs_stats(p_now timestamptz)
    returns table (queue text, type text, status text, count bigint,
                   oldest_runnable_seconds double precision)
    language sql stable
    as $$
select j.queue, j.type, j.status, count(*),
       extract(epoch from coalesce(p_now, now())
               - min(j.run_after) filter (
                   where j.status in ('queued', 'retrying')
                     and j.run_after <= coalesce(p_now, now())))::double precision
from tickq.jobs j
group by j.queue, j.type, j.status
$$;

-- Per queue and fairness group: jobs runnable now, running, and the age of the oldest
-- runnable job; only groups with live jobs (jobs_fair_idx and the running rows). The one
-- body of the store's group stats (jobs_stats_groups, under row-level security) and of
-- tickq.operator_group_stats (every user's). Security invoker, plain SQL without settings,
-- so a statement that reads it is planned as if it were written there.
create function tickq.jobs_group_stats(p_now timestamptz)
    returns table (queue text, group_key text, waiting bigint, running bigint,
                   oldest_runnable_seconds double precision)
    language sql stable
    as $$
select j.queue, j.group_key::text,
       count(*) filter (where j.status in ('queued', 'retrying')
                          and j.run_after <= coalesce(p_now, now())),
       count(*) filter (where j.status = 'running'),
       extract(epoch from coalesce(p_now, now()) - min(j.run_after) filter (
           where j.status in ('queued', 'retrying')
             and j.run_after <= coalesce(p_now, now())))::double precision
from tickq.jobs j
where j.status in ('queued', 'retrying', 'running')
group by j.queue, j.group_key
$$;

-- A page of jobs matching the console's filters (statuses, types, queues, groups, error
-- text, creation range; null: any), newest first after the (created_at, id) cursor: the one
-- search of the store's (jobs_search, jobs_search_listed; row-level security keeps an
-- application user to its own jobs, whose owner index orders them) and of
-- tickq.operator_jobs (every user's). Security invoker, plain SQL without settings, so a
-- statement that reads it is planned as if it were written there (a null filter folds
-- away).
create function tickq.jobs_search(
    p_statuses text[], p_types text[], p_queues text[], p_groups text[], p_error text,
    p_created_from timestamptz, p_created_to timestamptz,
    p_after_created timestamptz, p_after_id uuid, p_limit integer)
    returns setof tickq.jobs
    language sql stable
    as $$
select j.*
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

-- Cancel jobs of any user (tickq.jobs_cancel, the one cancel, for every owner) and say per
-- requested id what happened: asked to stop (it was running), compensating (a saga that
-- owes undos runs them first, or runs them already), cancelled, not found, or not
-- cancellable (with its status).
create or replace function tickq.operator_cancel(p_ids uuid[], p_now timestamptz)
    returns table (id uuid, status text, outcome text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
with requested as (
    select distinct r.id from unnest(p_ids) as r (id)
), cancelled as materialized (
    select c.id, c.status, c.cancel_requested
    from tickq.jobs_cancel(array(select r.id from requested r), coalesce(p_now, now()), null) c
)
select r.id,
       coalesce(c.status, j.status),
       case when c.cancel_requested then 'asked to stop'
            when c.status <> 'cancelled' then 'compensating'
            when c.id is not null then 'cancelled'
            when j.id is null then 'not found'
            else 'not cancellable' end
from requested r
left join cancelled c on c.id = r.id
left join tickq.jobs j on j.id = r.id
order by r.id
$$;

-- Send dead or cancelled jobs of any user back to the queue (tickq.jobs_retry by id, the one
-- retry, for every owner) and say per requested id what happened: retried, not found, not
-- retryable (with its status), parents unfinished (a parent has not succeeded, so it must
-- not run yet), or key taken (a live job holds its idempotency key, which the key table
-- says).
create or replace function tickq.operator_retry(p_ids uuid[], p_now timestamptz)
    returns table (id uuid, status text, outcome text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
with requested as (
    select distinct r.id from unnest(p_ids) as r (id)
), retried as materialized (
    select t.id, t.status
    from tickq.jobs_retry(array['dead', 'cancelled'], array(select r.id from requested r),
                          null, null, null, coalesce(p_now, now()), null) t
)
select r.id,
       coalesce(t.status, j.status),
       case when t.id is not null then 'retried'
            when j.id is null then 'not found'
            when j.status not in ('dead', 'cancelled') then 'not retryable'
            when exists (select from tickq.job_dependencies d
                         join tickq.jobs p on p.id = d.parent_id
                         where d.child_id = r.id and p.status <> 'succeeded')
                then 'parents unfinished'
            else 'key taken' end
from requested r
left join retried t on t.id = r.id
left join tickq.jobs j on j.id = r.id
order by r.id
$$;

-- Operators: counts across every user, nothing else (tickq.jobs_stats, the store's stats,
-- read with the owner's rights). A login in tickq_operator (the API's, so /admin/stats
-- works) can call this function and touch no row.
create or replace function tickq.operator_stats(p_now timestamptz)
    returns table (queue text, type text, status text, count bigint,
                   oldest_runnable_seconds double precision)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select s.queue, s.type, s.status, s.count, s.oldest_runnable_seconds
from tickq.jobs_stats(p_now) s
order by s.queue, s.type, s.status
$$;

-- Per queue and fairness group, across every user: jobs runnable now, running, and the
-- oldest runnable age (tickq.jobs_group_stats, the store's group stats, read with the
-- owner's rights).
create or replace function tickq.operator_group_stats(p_now timestamptz)
    returns table (queue text, group_key text, waiting bigint, running bigint,
                   oldest_runnable_seconds double precision)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select s.queue, s.group_key, s.waiting, s.running, s.oldest_runnable_seconds
from tickq.jobs_group_stats(p_now) s
order by s.queue, s.group_key
$$;

-- Every user's jobs for the operator list (tickq.jobs_search, the store's search, read
-- with the owner's rights): what identifies a job and how it went, never its payload or
-- result. Newest first, a page after the (created_at, id) cursor. As every
-- list of jobs, it leaves out a large progress (null, tickq.list_left_out) and cuts the
-- error to its first 200 characters (LIST_ERROR_CHARS in queue_core/pages.py); `truncated`
-- names what it left out or cut, each with the bytes it holds ({} when nothing). The page's
-- rows are chosen first, so only they are measured.
create or replace function tickq.operator_jobs(
    p_statuses text[], p_types text[], p_queues text[], p_groups text[], p_error text,
    p_created_from timestamptz, p_created_to timestamptz,
    p_after_created timestamptz, p_after_id uuid, p_limit integer)
    returns table (id uuid, queue text, type text, user_id uuid, group_key text, status text,
                   attempts integer, max_attempts integer, priority integer,
                   progress jsonb, error text, run_after timestamptz,
                   created_at timestamptz, updated_at timestamptz, finished_at timestamptz,
                   truncated jsonb)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select j.id, j.queue, j.type, j.user_id, j.group_key, j.status, j.attempts, j.max_attempts,
       j.priority, case when b.progress is null then j.progress end, left(j.error, 200),
       j.run_after, j.created_at, j.updated_at, j.finished_at,
       jsonb_strip_nulls(jsonb_build_object('progress', b.progress, 'error', b.error))
from tickq.jobs_search(p_statuses, p_types, p_queues, p_groups, p_error, p_created_from,
                       p_created_to, p_after_created, p_after_id, p_limit) j
cross join lateral (
    select tickq.list_left_out(j.progress) as progress,
           case when char_length(j.error) > 200 then octet_length(j.error) end as error) b
order by j.created_at desc, j.id desc
$$;

revoke all on function tickq.jobs_stats(timestamptz), tickq.jobs_group_stats(timestamptz),
    tickq.jobs_search(text[], text[], text[], text[], text, timestamptz, timestamptz,
                      timestamptz, uuid, integer) from public;
grant execute on function tickq.jobs_stats(timestamptz), tickq.jobs_group_stats(timestamptz),
    tickq.jobs_search(text[], text[], text[], text[], text, timestamptz, timestamptz,
                      timestamptz, uuid, integer) to tickq_app, tickq_worker;
