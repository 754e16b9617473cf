-- Statements of queue_core/policies/flow_limits.py.
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

-- The statements call security-definer functions (schema/functions/flow_*.sql), so the
-- operator console (tickq_operator, which reads no table) runs them as the CLI does.

-- name: flow_limits_set
-- Create or change a key prefix's flow limits (queue_core/model/flow.py); the next claim applies
-- them.
select * from tickq.flow_limits_set(%(prefix)s::text, %(max_running)s::integer,
                                    %(rate_limit)s::integer, %(rate_period_seconds)s::float8);

-- name: flow_limits_list
-- Every limited key prefix.
select * from tickq.flow_limits_list();

-- name: flow_limits_clear
-- Remove a prefix's limits (its keys fall to a shorter limited prefix, or go free).
select * from tickq.flow_limits_clear(%(prefix)s::text);

-- name: flow_keys_now
-- The flow keys with live jobs or a live hold: jobs running and waiting (runnable now) of
-- each, the hold's end, and the prefix that governs it.
select * from tickq.flow_live_keys(%(now)s::timestamptz, %(limit)s::integer);

-- name: flow_hold
-- Keep every job of a key from starting until %(seconds)s from now (at most a day, the
-- table's check); a longer hold already set stands.
select * from tickq.flow_hold_set(%(key)s::text, %(seconds)s::float8, %(now)s::timestamptz);

-- name: flow_hold_release
-- End a key's hold at once.
delete from tickq.flow_holds where key = %(key)s returning key;
