-- Migration 0014 online: the finished jobs are copied into their partitions while the queue
-- runs, in short transactions, so that the migration itself (the swap) only moves the live
-- jobs and the finished ones that changed meanwhile (queue_core/partition_staging.py).
--
-- The copy goes to tickq.jobs_done, built exactly as 0014 would build it but not yet a
-- partition of anything: nothing reads it until 0014 attaches it. Every change to
-- tickq.jobs from the moment the copy starts is noted by id in tickq.jobs_0014_changed; the
-- notes are caught up after the copy and, for the last time, under 0014's lock. A noted job
-- loses its copy and gets a fresh one if it is finished then; a job never noted is copied
-- once, as it was, by the batches.

-- name: stage
-- The finished jobs' table, as 0014 makes it.
create table tickq.jobs_done (
    like tickq.jobs
        including defaults including constraints including storage including compression
) partition by range (finished_at);

-- Each partition's check on the statuses lets 0014 attach the table without reading its
-- rows (the partition's constraint is implied); 0014 drops them once attached.
create table tickq.jobs_done_default partition of tickq.jobs_done default;
alter table tickq.jobs_done_default add constraint jobs_done_0014_statuses
    check (status in ('succeeded', 'dead', 'cancelled'));

-- A partition for every day that has finished jobs, and today's and the next three days',
-- as tickq.jobs_partitions_ensure makes them, so each row is copied once, to its day.
do $$
declare
    v_day  date;
    v_name text;
    v_lo   timestamptz;
    v_hi   timestamptz;
begin
    for v_day in
        select distinct (finished_at at time zone 'UTC')::date
        from tickq.jobs
        where finished_at is not null and status in ('succeeded', 'dead', 'cancelled')
        union
        select d::date
        from generate_series((now() at time zone 'UTC')::date,
                             (now() at time zone 'UTC')::date + 3, interval '1 day') d
        order by 1
    loop
        v_name := 'jobs_done_' || to_char(v_day, 'YYYYMMDD');
        v_lo := v_day::timestamp at time zone 'UTC';
        v_hi := (v_day + 1)::timestamp at time zone 'UTC';
        execute format(
            'create table tickq.%I (like tickq.jobs including defaults'
            ' including constraints including storage including compression,'
            ' constraint %I check (finished_at is not null'
            ' and finished_at >= %L and finished_at < %L),'
            ' constraint jobs_done_0014_statuses'
            ' check (status in (''succeeded'', ''dead'', ''cancelled'')))',
            v_name, v_name || '_bounds', v_lo, v_hi);
        execute format(
            'alter table tickq.jobs_done attach partition tickq.%I'
            ' for values from (%L) to (%L)', v_name, v_lo, v_hi);
    end loop;
end $$;

-- The copies of noted jobs are found by id. Named as 0014's index on tickq.jobs names it on
-- this table and its partitions, which 0014 then attaches instead of building.
create index on tickq.jobs_done (id);

-- Catch the copy up with the noted changes: every noted job loses its copy and gets a fresh
-- one if it is finished now. One statement, one snapshot: a change committed after it is
-- noted again, for the next round. Returns how many jobs were noted.
create or replace function tickq.jobs_0014_catch_up() returns bigint
    language plpgsql
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_noted bigint;
begin
    with noted as (delete from tickq.jobs_0014_changed returning id),
         ids as (select distinct id from noted),
         dropped as (delete from tickq.jobs_done d using ids where d.id = ids.id),
         copied as (insert into tickq.jobs_done
                    select j.* from tickq.jobs j join ids on j.id = ids.id
                    where j.status in ('succeeded', 'dead', 'cancelled'))
    select count(*) into v_noted from ids;
    return v_noted;
end $$;

revoke all on function tickq.jobs_0014_catch_up() from public;

-- Last, so the table is locked against writers (creating a trigger waits for those at
-- work and holds new ones back) only for the moment it takes to make them.
create table tickq.jobs_0014_changed (id uuid not null);

create or replace function tickq.jobs_0014_note() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    insert into tickq.jobs_0014_changed (id) select c.id from changed c;
    return null;
end $$;

-- A truncate empties the copy too: no note could name every row it removed.
create or replace function tickq.jobs_0014_forget_all() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    truncate tickq.jobs_done, tickq.jobs_0014_changed;
    return null;
end $$;

revoke all on function tickq.jobs_0014_note(), tickq.jobs_0014_forget_all() from public;

-- Statement triggers with the rows they touched: one insert of ids per statement.
create trigger jobs_0014_inserted after insert on tickq.jobs
    referencing new table as changed
    for each statement execute function tickq.jobs_0014_note();
create trigger jobs_0014_updated after update on tickq.jobs
    referencing new table as changed
    for each statement execute function tickq.jobs_0014_note();
create trigger jobs_0014_deleted after delete on tickq.jobs
    referencing old table as changed
    for each statement execute function tickq.jobs_0014_note();
create trigger jobs_0014_truncated after truncate on tickq.jobs
    for each statement execute function tickq.jobs_0014_forget_all();

-- name: copy
-- The next batch of finished jobs by id, copied as they are now.
with batch as materialized (
    select * from tickq.jobs
    where id > %(after)s and status in ('succeeded', 'dead', 'cancelled')
    order by id
    limit %(rows)s
), copied as (
    insert into tickq.jobs_done select * from batch
)
select (select b.id from batch b order by b.id desc limit 1) as last, count(*) as n from batch

-- name: index
-- The finished jobs' other indexes, as 0014 makes them, built once after the copy.
create index on tickq.jobs_done (user_id, created_at desc, id desc) where user_id is not null;
-- Two of the names are still the old table's: 0014 renames these once it is gone.
create index jobs_done_0014_finished_idx on tickq.jobs_done (status, finished_at);
create index jobs_done_0014_failed_finished_idx on tickq.jobs_done (finished_at)
    where errors <> '[]'::jsonb;
create index jobs_done_parents_idx on tickq.jobs_done (finished_at) where has_children

-- name: catch_up
select tickq.jobs_0014_catch_up() as noted

-- name: unstage
-- What an attempt that failed leaves behind, so the queue does not keep noting its changes.
drop trigger if exists jobs_0014_inserted on tickq.jobs;
drop trigger if exists jobs_0014_updated on tickq.jobs;
drop trigger if exists jobs_0014_deleted on tickq.jobs;
drop trigger if exists jobs_0014_truncated on tickq.jobs;
drop table if exists tickq.jobs_done, tickq.jobs_0014_changed;
drop function if exists tickq.jobs_0014_note(), tickq.jobs_0014_forget_all(),
    tickq.jobs_0014_catch_up()
