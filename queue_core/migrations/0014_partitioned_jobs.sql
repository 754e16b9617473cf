-- tickq.jobs becomes one partitioned table with two kinds of storage (docs/operations.md,
-- "Partitions"): live jobs (waiting, queued, running, retrying) in the small partition
-- tickq.jobs_live with the claim, lease, fairness and retry indexes; finished jobs
-- (succeeded, dead, cancelled) in tickq.jobs_done, partitioned again by finish time, one
-- partition per UTC day (tickq.jobs_done_YYYYMMDD) and a default one that catches a finish
-- whose day has no partition yet, so a missing partition never fails a finish.
--
-- The partition key is the status: every statement about live jobs already names the
-- statuses it reads (status = 'running', status in ('queued', 'retrying')), so the planner
-- reads jobs_live alone and a finish never probes the indexes of finished days. A job that
-- finishes (or is retried from dead) moves between partitions inside its UPDATE.
--
-- What changes for the database around the table:
-- * Ids stay unique because the engine generates them (gen_random_uuid, uuid4): a
--   partitioned table cannot hold a unique index without its partition key, so tickq.jobs
--   has a plain index on id in every partition.
-- * Foreign keys cannot reference a partitioned table by id alone: the step, signal and
--   dependency rows of a deleted job go with it through tickq.jobs_forget (a statement
--   trigger below), and with a dropped partition through tickq.jobs_partition_drop.
-- * The idempotency index cannot be unique across partitions either: keys are held
--   elsewhere (migration 0013), and this migration does not rebuild that index.

-- 0. Staged (queue_core/partition_staging.py, as `tickq migrate` does it): the finished jobs
-- are already in tickq.jobs_done, copied while the queue ran, and every change since is
-- noted. Under the table's lock nothing changes any more: the last notes are caught up and
-- the noting stops. Unstaged (this file applied by hand), step 5 copies every row here.
do $$
begin
    if to_regclass('tickq.jobs_0014_changed') is not null then
        lock table tickq.jobs in access exclusive mode;
        perform tickq.jobs_0014_catch_up();
        drop trigger jobs_0014_inserted on tickq.jobs;
        drop trigger jobs_0014_updated on tickq.jobs;
        drop trigger jobs_0014_deleted on tickq.jobs;
        drop trigger jobs_0014_truncated on tickq.jobs;
    end if;
end $$;

-- 1. What hangs on the table by name or row type, remembered to be rebuilt on the new one.
create temporary table tickq_0014_functions on commit drop as
select p.oid::regprocedure::text as signature, pg_get_functiondef(p.oid) as definition,
       p.proacl as acl
from pg_proc p
where p.prorettype = 'tickq.jobs'::regtype;

create temporary table tickq_0014_triggers on commit drop as
select pg_get_triggerdef(t.oid) as definition
from pg_trigger t
where t.tgrelid = 'tickq.jobs'::regclass and not t.tgisinternal;

-- Policies of tickq.jobs, and those of other tables that read it (the steps' and signals').
create temporary table tickq_0014_policies on commit drop as
select p.polname as name, p.polrelid::regclass::text as tab, p.polpermissive as permissive,
       case p.polcmd when 'r' then 'select' when 'a' then 'insert' when 'w' then 'update'
                     when 'd' then 'delete' else 'all' end as command,
       (select string_agg(case r when 0 then 'public' else quote_ident(pg_get_userbyid(r)) end,
                          ', ')
        from unnest(p.polroles) r) as roles,
       pg_get_expr(p.polqual, p.polrelid) as qual,
       pg_get_expr(p.polwithcheck, p.polrelid) as with_check
from pg_policy p
where p.polrelid = 'tickq.jobs'::regclass
   or exists (select from pg_depend d
              where d.classid = 'pg_policy'::regclass and d.objid = p.oid
                and d.refclassid = 'pg_class'::regclass
                and d.refobjid = 'tickq.jobs'::regclass);

create temporary table tickq_0014_grants on commit drop as
select a.grantee, a.privilege_type, null::name as column_name
from pg_class c, aclexplode(c.relacl) a
where c.oid = 'tickq.jobs'::regclass
union all
select a.grantee, a.privilege_type, t.attname
from pg_attribute t, aclexplode(t.attacl) a
where t.attrelid = 'tickq.jobs'::regclass and t.attnum > 0 and not t.attisdropped;

create temporary table tickq_0014_storage on commit drop as
select reloptions from pg_class where oid = 'tickq.jobs'::regclass;

-- 2. Let go of what ties the old table down.
do $$
declare
    r record;
begin
    for r in select c.conrelid::regclass as tab, c.conname
             from pg_constraint c
             where c.confrelid = 'tickq.jobs'::regclass and c.contype = 'f'
    loop
        execute format('alter table %s drop constraint %I', r.tab, r.conname);
    end loop;
    for r in select signature from tickq_0014_functions loop
        execute format('drop function %s', r.signature);
    end loop;
    for r in select name, tab from tickq_0014_policies where tab <> 'tickq.jobs' loop
        execute format('drop policy %I on %s', r.name, r.tab);
    end loop;
end $$;

alter table tickq.jobs rename to jobs_unpartitioned;

-- 3. The new table: the same columns, defaults and checks, partitioned by status.
create table tickq.jobs (
    like tickq.jobs_unpartitioned
        including defaults including constraints including storage including compression
) partition by list (status);

create table tickq.jobs_live partition of tickq.jobs
    for values in ('waiting', 'queued', 'running', 'retrying');

-- Staged, the finished jobs' table is attached as it is: each of its partitions has a check
-- that implies the partition's constraint, so attaching reads none of their rows.
do $$
declare
    r record;
begin
    if to_regclass('tickq.jobs_done') is null then
        create table tickq.jobs_done partition of tickq.jobs
            for values in ('succeeded', 'dead', 'cancelled')
            partition by range (finished_at);
        create table tickq.jobs_done_default partition of tickq.jobs_done default;
    else
        alter table tickq.jobs attach partition tickq.jobs_done
            for values in ('succeeded', 'dead', 'cancelled');
        for r in select c.conrelid::regclass as tab
                 from pg_constraint c
                 join pg_inherits i on i.inhrelid = c.conrelid
                 where i.inhparent = 'tickq.jobs_done'::regclass
                   and c.conname = 'jobs_done_0014_statuses'
        loop
            execute format('alter table %s drop constraint jobs_done_0014_statuses', r.tab);
        end loop;
    end if;
end $$;

-- The storage settings of migration 0006 belong to the heap that churns: jobs_live.
do $$
declare
    options text[] := (select reloptions from tickq_0014_storage);
begin
    if options is not null then
        execute format('alter table tickq.jobs_live set (%s)', array_to_string(options, ', '));
    end if;
end $$;

-- 4. Day partitions of finished jobs. tickq.jobs_partitions_ensure gives each of the days
-- from p_from to p_from + p_days (and every day that has rows in the default partition) a
-- partition of its own, moving those rows out of the default first. Each day is one short
-- step under a short lock timeout, retried, so it never holds up the queue: attaching takes
-- a brief exclusive lock on the default partition only, and none that blocks a finish.
create function tickq.jobs_partition_name(p_day date) returns text
    language sql immutable
    as $$ select 'jobs_done_' || to_char(p_day, 'YYYYMMDD') $$;

create function tickq.jobs_partitions_ensure(p_from date, p_days integer)
    returns integer
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    set lock_timeout = '200ms'
    as $$
declare
    v_day     date;
    v_name    text;
    v_lo      timestamptz;
    v_hi      timestamptz;
    v_created integer := 0;
    v_try     integer;
begin
    if p_days < 0 or p_days > 366 then
        raise exception 'tickq: p_days must be between 0 and 366, got %', p_days
            using errcode = 'invalid_parameter_value';
    end if;
    for v_day in
        select d::date from generate_series(p_from, p_from + p_days, interval '1 day') d
        union
        select distinct (finished_at at time zone 'UTC')::date
        from tickq.jobs_done_default where finished_at is not null
        order by 1
    loop
        v_name := tickq.jobs_partition_name(v_day);
        continue when to_regclass('tickq.' || v_name) is not null;
        v_lo := v_day::timestamp at time zone 'UTC';
        v_hi := (v_day + 1)::timestamp at time zone 'UTC';
        v_try := 0;
        loop
            begin
                -- The default partition first: a finish on this day must not land there
                -- between the move below and the attach, which would then fail its check.
                -- Attaching takes this lock anyway; taken first, it also covers the move.
                lock table tickq.jobs_done_default in access exclusive mode;
                execute format(
                    'create table tickq.%I (like tickq.jobs including defaults'
                    ' including constraints including storage including compression,'
                    ' constraint %I check (finished_at is not null'
                    ' and finished_at >= %L and finished_at < %L))',
                    v_name, v_name || '_bounds', v_lo, v_hi);
                -- Rows a finish put in the default partition move to their day first; the
                -- setting tells row triggers that watch the table (tests' recorders) that
                -- this is storage moving, not a job changing.
                perform set_config('tickq.moving_rows', 'on', true);
                execute format(
                    'with moved as (delete from tickq.jobs_done_default'
                    ' where finished_at >= %L and finished_at < %L returning *)'
                    ' insert into tickq.%I select * from moved', v_lo, v_hi, v_name);
                perform set_config('tickq.moving_rows', '', true);
                execute format(
                    'alter table tickq.jobs_done attach partition tickq.%I'
                    ' for values from (%L) to (%L)', v_name, v_lo, v_hi);
                v_created := v_created + 1;
                exit;
            exception when lock_not_available or deadlock_detected then
                v_try := v_try + 1;
                if v_try >= 20 then
                    raise;
                end if;
                perform pg_sleep(0.05 * v_try);
            end;
        end loop;
    end loop;
    return v_created;
end $$;

-- Drop one day partition whose every job retention lets go (queue_core/retention.py decides
-- which), with the idempotency keys, steps, signals and dependency edges of its jobs, in one
-- transaction.
-- Returns what went, by queue, type and status, for the pruning report (a row of nulls when
-- it was empty); nothing, and the partition stays, when one of its jobs is a parent that an unfinished child still needs
-- (the child reads its result when it runs).
create function tickq.jobs_partition_drop(p_name text)
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
                           ' where k.job_id = j.id', p_name);
            execute format('delete from tickq.job_steps s using tickq.%I j'
                           ' where s.job_id = j.id', p_name);
            execute format('delete from tickq.job_signals s using tickq.%I j'
                           ' where s.job_id = j.id', p_name);
            execute format('delete from tickq.job_dependencies d using tickq.%I j'
                           ' where d.child_id = j.id or d.parent_id = j.id', p_name);
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

-- The day partitions, oldest first, with the newest finish time they can hold (exclusive).
create function tickq.jobs_day_partitions()
    returns table (name text, day date, upper_bound timestamptz)
    language sql stable
    as $$
select c.relname::text,
       to_date(substr(c.relname, 11), 'YYYYMMDD'),
       (to_date(substr(c.relname, 11), 'YYYYMMDD') + 1)::timestamp at time zone 'UTC'
from pg_inherits i
join pg_class c on c.oid = i.inhrelid
where i.inhparent = 'tickq.jobs_done'::regclass and c.relname ~ '^jobs_done_[0-9]{8}$'
order by c.relname
$$;

revoke all on function tickq.jobs_partitions_ensure(date, integer),
    tickq.jobs_partition_drop(text) from public;
grant execute on function tickq.jobs_partitions_ensure(date, integer),
    tickq.jobs_partition_drop(text) to tickq_worker;

-- 5. The rows. Staged, only the live jobs are left to move. Unstaged, each day of finished
-- jobs gets its partition first, so every row is copied once, straight to where it belongs.
do $$
begin
    if to_regclass('tickq.jobs_0014_changed') is not null then
        insert into tickq.jobs select * from tickq.jobs_unpartitioned
        where status not in ('succeeded', 'dead', 'cancelled');
        drop table tickq.jobs_0014_changed;
        drop function tickq.jobs_0014_note(), tickq.jobs_0014_forget_all(),
            tickq.jobs_0014_catch_up();
    else
        perform tickq.jobs_partitions_ensure(d.day, 0)
        from (select distinct (finished_at at time zone 'UTC')::date as day
              from tickq.jobs_unpartitioned
              where finished_at is not null and status in ('succeeded', 'dead', 'cancelled')
              order by 1) d;
        insert into tickq.jobs select * from tickq.jobs_unpartitioned;
    end if;
end $$;
drop table tickq.jobs_unpartitioned;

-- 6. Indexes, built once the rows are in. On every partition: lookups by id and a user's list.
create index jobs_id_idx on tickq.jobs (id);
create index jobs_owner_idx on tickq.jobs (user_id, created_at desc, id desc)
    where user_id is not null;

-- Live jobs only: the claim, the fair claim, expired leases, jobs waiting to retry.
create index jobs_claim_idx on tickq.jobs_live (queue, priority desc, run_after, created_at)
    where status in ('queued', 'retrying');
create index jobs_fair_idx on tickq.jobs_live
    (queue, priority desc, group_key, run_after, created_at)
    where status in ('queued', 'retrying');
create index jobs_lease_idx on tickq.jobs_live (lease_until) where status = 'running';
create index jobs_retrying_idx on tickq.jobs_live (updated_at) where status = 'retrying';

-- Finished jobs only: listing and retention by status and age, failure counts, and the
-- parents retention must keep while a child still needs them.
-- (Staged, they were built after the copy, two under names the old table held.)
alter index if exists tickq.jobs_done_0014_finished_idx rename to jobs_finished_idx;
alter index if exists tickq.jobs_done_0014_failed_finished_idx
    rename to jobs_failed_finished_idx;
create index if not exists jobs_finished_idx on tickq.jobs_done (status, finished_at);
create index if not exists jobs_failed_finished_idx on tickq.jobs_done (finished_at)
    where errors <> '[]'::jsonb;
create index if not exists jobs_done_parents_idx on tickq.jobs_done (finished_at)
    where has_children;

-- 7. Row-level security, grants, triggers and functions as they were.
alter table tickq.jobs enable row level security;
alter table tickq.jobs force row level security;

do $$
declare
    r record;
begin
    for r in select * from tickq_0014_policies loop
        execute format('create policy %I on %s as %s for %s to %s',
                       r.name, r.tab, case when r.permissive then 'permissive' else 'restrictive' end,
                       r.command, r.roles)
             || coalesce(' using (' || r.qual || ')', '')
             || coalesce(' with check (' || r.with_check || ')', '');
    end loop;
    for r in select * from tickq_0014_grants loop
        execute format('grant %s%s on tickq.jobs to %s', r.privilege_type,
                       coalesce(' (' || quote_ident(r.column_name) || ')', ''),
                       case r.grantee when 0 then 'public'
                                      else quote_ident(pg_get_userbyid(r.grantee)) end);
    end loop;
end $$;

do $$
declare
    r record;
begin
    for r in select definition from tickq_0014_triggers loop
        execute r.definition;
    end loop;
    -- Functions returning jobs, and who may call them.
    for r in select * from tickq_0014_functions loop
        execute r.definition;
        if r.acl is not null then
            execute format('revoke all on function %s from public', r.signature);
            execute (select string_agg(
                         format('grant execute on function %s to %s', r.signature,
                                case a.grantee when 0 then 'public'
                                               else quote_ident(pg_get_userbyid(a.grantee))
                                end), '; ')
                     from aclexplode(r.acl) a where a.privilege_type = 'EXECUTE');
        end if;
    end loop;
end $$;

-- 8. A deleted job takes its key, steps, signals and dependency edges with it, as the foreign
-- keys' cascades did. A statement trigger with the deleted rows: one set-based delete per
-- table and statement, and nothing at all for statements that delete no job. Security
-- definer, as a cascade: the rows go whoever deleted the job.
create function tickq.jobs_forget() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_keys k using gone g where k.job_id = g.id;
    delete from tickq.job_steps s using gone g where s.job_id = g.id;
    delete from tickq.job_signals s using gone g where s.job_id = g.id;
    delete from tickq.job_dependencies d using gone g where d.child_id = g.id;
    delete from tickq.job_dependencies d using gone g where d.parent_id = g.id;
    return null;
end $$;

create trigger jobs_forget after delete on tickq.jobs
    referencing old table as gone
    for each statement execute function tickq.jobs_forget();

-- Emptying the jobs (tests, benchmarks, a reset) empties what hung on them, as TRUNCATE ...
-- CASCADE did through the foreign keys. A delete, not a truncate: a TRUNCATE that names
-- these tables too is still using them here.
create function tickq.jobs_forget_all() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_steps;
    delete from tickq.job_signals;
    delete from tickq.job_dependencies;
    return null;
end $$;

create trigger jobs_forget_all after truncate on tickq.jobs
    for each statement execute function tickq.jobs_forget_all();

revoke all on function tickq.jobs_forget(), tickq.jobs_forget_all() from public;

-- Today's partition and the next three days' (the days of the copied rows have theirs).
select tickq.jobs_partitions_ensure((now() at time zone 'UTC')::date, 3);
