-- Retention: policies, pruning and dropping day partitions (queue_core/policies/retention.py).
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

-- name: retention_policies_set
-- Create or change the policy of one scope (queue and/or type; null is "any").
insert into tickq.retention_policies as p (queue, type, statuses, max_age_seconds, keep_last)
values (%(queue)s, %(type)s, %(statuses)s::text[], %(max_age_seconds)s, %(keep_last)s)
on conflict on constraint retention_policies_scope_key do update
    set statuses = excluded.statuses, max_age_seconds = excluded.max_age_seconds,
        keep_last = excluded.keep_last, updated_at = now()
returning id, queue, type, statuses, max_age_seconds, keep_last;

-- name: retention_policies_list
-- Every policy, most specific first (the order in which they claim jobs).
select id, queue, type, statuses, max_age_seconds, keep_last from tickq.retention_policies
order by (type is not null)::int * 2 + (queue is not null)::int desc, queue, type;

-- name: retention_policies_clear
-- Remove the policy of one scope.
delete from tickq.retention_policies
where queue is not distinct from %(queue)s and type is not distinct from %(type)s
returning id;

-- name: retention_prune
-- Delete up to %(batch)s jobs that one policy lets go (retention_doomed). Each call is its
-- own short transaction; SKIP LOCKED leaves rows someone is touching (a retry) for the next
-- pass.
{{retention_doomed}}
    limit %(batch)s
    for update of j skip locked
)
-- Their idempotency keys, steps, signals and edges go in the same statement, through the
-- tickq.jobs_forget trigger (queue_core/schema/triggers.sql).
delete from tickq.jobs j
where j.id = any(array(select id from doomed))
returning j.status;

-- name: retention_count
-- The jobs retention_prune would delete under one policy, counted by status (prune
-- --dry-run): the same choice of jobs (retention_doomed), without the batch limit, the
-- locks or the delete.
{{retention_doomed}}
)
select j.status, count(*)
from tickq.jobs j
where j.id = any(array(select id from doomed))
group by j.status;

-- name: retention_partitions_droppable
-- Day partitions that retention drops whole instead of deleting their rows (retention.py),
-- oldest first: a catch-all policy exists (so each job has a governing policy), every
-- policy lets go of every job that finished before the partition's end (its max age is
-- that old, or it keeps none), and no job in it has a status that some policy keeps. Jobs
-- in other partitions are pruned row by row, as are those of any policy keeping the last N.
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), rules as materialized (
    select coalesce(bool_or(p.queue is null and p.type is null), false) as catch_all,
           min(case when p.keep_last = 0 then 'infinity'::timestamptz
                    when p.max_age_seconds is not null
                        then clock.now - p.max_age_seconds * interval '1 second'
                    else '-infinity'::timestamptz end) as before,
           array(select s from unnest(array['succeeded', 'dead', 'cancelled']) s
                 where exists (select from tickq.retention_policies k
                               where not (s = any(k.statuses)))) as kept
    from tickq.retention_policies p, clock
)
select d.name
from tickq.jobs_day_partitions() d, rules r
where r.catch_all and d.upper_bound <= r.before
  and not exists (select from tickq.jobs j
                  where j.status = any(r.kept)
                    and j.finished_at >= d.upper_bound - interval '1 day'
                    and j.finished_at < d.upper_bound)
order by d.name;

-- name: retention_partition_drop
-- Drop one day partition with its jobs' steps, signals and edges; what went, by queue, type
-- and status (nothing when a parent in it is still needed by an unfinished child).
select p.queue, p.type, p.status, p.n
from tickq.jobs_partition_drop(%(name)s) p;
