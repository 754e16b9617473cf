-- Day partitions of finished jobs (queue_core/policies/partitions.py).
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

-- name: partitions_ensure
-- Day partitions of finished jobs from today (UTC) to `days` ahead, and for each day that
-- has rows in the default partition (which move in); returns how many were created.
select tickq.jobs_partitions_ensure(
    (coalesce(%(now)s::timestamptz, now()) at time zone 'UTC')::date, %(days)s::integer);

-- name: partitions_list
-- The day partitions of finished jobs, oldest first, with their row estimates.
select d.name, d.day, d.upper_bound, greatest(c.reltuples, 0)::bigint as estimated_rows
from tickq.jobs_day_partitions() d
join pg_class c on c.oid = ('tickq.' || d.name)::regclass
order by d.name;
