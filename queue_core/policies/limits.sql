-- Per-type, per-queue and per-group limits (queue_core/policies/limits.py).
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

-- name: type_limits_set
-- Create or change a type's limits; the rate log survives a change of the numbers.
insert into tickq.type_limits as l (
    type, max_running, rate_limit, rate_period_seconds, max_running_per_group)
values (%(type)s, %(max_running)s, %(rate_limit)s, %(rate_period_seconds)s,
        %(max_running_per_group)s)
on conflict (type) do update
    set max_running = excluded.max_running, rate_limit = excluded.rate_limit,
        rate_period_seconds = excluded.rate_period_seconds,
        max_running_per_group = excluded.max_running_per_group, updated_at = now()
returning type, max_running, rate_limit, rate_period_seconds, max_running_per_group;

-- name: type_limits_list
-- Every type limit, with the jobs of the type running now.
select l.type, l.max_running, l.rate_limit, l.rate_period_seconds, l.max_running_per_group,
       (select count(*) from tickq.jobs j where j.status = 'running' and j.type = l.type)
           as running
from tickq.type_limits l
order by l.type;

-- name: type_limits_clear
-- Remove a type's limits.
delete from tickq.type_limits where type = %(type)s returning type;

-- name: queue_limits_set
-- Create or change a queue's maximum depth and cap per owner; a bound not given (null)
-- keeps the stored one.
insert into tickq.queue_limits as l (queue, max_depth, max_depth_per_owner)
values (%(queue)s, %(max_depth)s, %(max_depth_per_owner)s)
on conflict (queue) do update
set max_depth = coalesce(excluded.max_depth, l.max_depth),
    max_depth_per_owner = coalesce(excluded.max_depth_per_owner, l.max_depth_per_owner),
    updated_at = now()
returning queue, max_depth, max_depth_per_owner;

-- name: queue_limits_list
-- Every queue limit, with the jobs waiting in the queue now (waiting for parents too).
select l.queue, l.max_depth, l.max_depth_per_owner,
       (select count(*) from tickq.jobs j
        where j.queue = l.queue and j.status in ('queued', 'retrying', 'waiting')) as waiting
from tickq.queue_limits l
order by l.queue;

-- name: queue_limits_clear
-- Remove a queue's maximum depth.
delete from tickq.queue_limits where queue = %(queue)s returning queue;

-- name: queue_group_limits_set
-- Create or change a queue's cap of running jobs per group.
insert into tickq.queue_group_limits as l (queue, max_running_per_group)
values (%(queue)s, %(max_running_per_group)s)
on conflict (queue) do update
    set max_running_per_group = excluded.max_running_per_group, updated_at = now()
returning queue, max_running_per_group;

-- name: queue_group_limits_list
-- Every queue's cap per group, with the most jobs one group of it runs now.
select l.queue, l.max_running_per_group,
       coalesce((select max(n) from (select count(*) as n from tickq.jobs j
                                     where j.status = 'running' and j.queue = l.queue
                                     group by j.group_key) g), 0) as busiest
from tickq.queue_group_limits l
order by l.queue;

-- name: queue_group_limits_clear
-- Remove a queue's cap per group.
delete from tickq.queue_group_limits where queue = %(queue)s returning queue;
