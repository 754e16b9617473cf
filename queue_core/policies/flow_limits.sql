-- Statements of queue_core/policies/flow_limits.py.
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

-- name: flow_limits_set
-- Create or change a key prefix's flow limits (queue_core/model/flow.py); the next claim applies
-- them.
insert into tickq.flow_limits as l (prefix, max_running, rate_limit, rate_period_seconds)
values (%(prefix)s, %(max_running)s, %(rate_limit)s, %(rate_period_seconds)s)
on conflict (prefix) do update
    set max_running = excluded.max_running, rate_limit = excluded.rate_limit,
        rate_period_seconds = excluded.rate_period_seconds, updated_at = now()
returning prefix, max_running, rate_limit, rate_period_seconds;

-- name: flow_limits_list
-- Every limited key prefix.
select prefix, max_running, rate_limit, rate_period_seconds
from tickq.flow_limits
order by prefix;

-- name: flow_limits_clear
-- Remove a prefix's limits (its keys fall to a shorter limited prefix, or go free).
delete from tickq.flow_limits where prefix = %(prefix)s returning prefix;

-- name: flow_keys_now
-- The flow keys with live jobs or a live hold: jobs running and waiting (runnable now) of
-- each, the hold's end, and the prefix that governs it (tickq.flow_limit_of).
with counts as (
    select k as key,
           count(*) filter (where j.status = 'running') as running,
           count(*) filter (where j.status in ('queued', 'retrying')
                              and j.run_after <= coalesce(%(now)s::timestamptz, now()))
               as waiting
    from tickq.jobs j, unnest(j.flow_keys) k
    where j.status in ('queued', 'running', 'retrying') and j.flow_keys <> '{}'
    group by k
), holds as (
    select key, until from tickq.flow_holds
    where until > coalesce(%(now)s::timestamptz, now())
)
select coalesce(c.key, h.key) as key, coalesce(c.running, 0) as running,
       coalesce(c.waiting, 0) as waiting, h.until as held_until,
       (select g.prefix from tickq.flow_limit_of(coalesce(c.key, h.key)) g) as prefix
from counts c full join holds h on h.key = c.key
order by 1
limit %(limit)s;

-- name: flow_hold
-- Keep every job of a key from starting until %(seconds)s from now (at most a day, the
-- table's check); a longer hold already set stands.
insert into tickq.flow_holds as h (key, until, set_at)
values (%(key)s, coalesce(%(now)s::timestamptz, now()) + %(seconds)s * interval '1 second',
        coalesce(%(now)s::timestamptz, now()))
on conflict (key) do update
    set until = greatest(h.until, excluded.until), set_at = greatest(h.set_at, excluded.set_at)
returning key, until;

-- name: flow_hold_release
-- End a key's hold at once.
delete from tickq.flow_holds where key = %(key)s returning key;
