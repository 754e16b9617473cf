-- Cron schedules (queue_core/policies/schedules.py).
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

-- name: schedules_add
-- Create a schedule, or replace one of the same name when %(replace)s; no row: it exists.
insert into tickq.schedules as s (
    name, cron, timezone, type, payload, queue, priority, max_attempts, missed, enabled,
    next_at, created_at, updated_at, group_key, flow_keys)
values (%(name)s, %(cron)s, %(timezone)s, %(type)s, %(payload)s::jsonb, %(queue)s,
        %(priority)s, %(max_attempts)s, %(missed)s, %(enabled)s, %(next_at)s,
        coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()),
        %(group_key)s::text, %(flow_keys)s::text[])
on conflict (name) do update
    set cron = excluded.cron, timezone = excluded.timezone, type = excluded.type,
        payload = excluded.payload, queue = excluded.queue, priority = excluded.priority,
        max_attempts = excluded.max_attempts, missed = excluded.missed,
        enabled = excluded.enabled, next_at = excluded.next_at,
        updated_at = excluded.updated_at, group_key = excluded.group_key,
        flow_keys = excluded.flow_keys
    where %(replace)s
returning name, cron, timezone, type, payload, queue, priority, max_attempts, missed, enabled,
       last_fired, next_at, created_at, updated_at, group_key as "group", flow_keys;

-- name: schedules_list
-- Every schedule, by name.
select name, cron, timezone, type, payload, queue, priority, max_attempts, missed, enabled,
       last_fired, next_at, created_at, updated_at, group_key as "group", flow_keys
from tickq.schedules order by name;

-- name: schedules_get
-- One schedule by name.
select name, cron, timezone, type, payload, queue, priority, max_attempts, missed, enabled,
       last_fired, next_at, created_at, updated_at, group_key as "group", flow_keys
from tickq.schedules where name = %(name)s;

-- name: schedules_set_enabled
-- Switch a schedule on or off; switching on restarts it at its next occurrence from now.
update tickq.schedules
set enabled = %(enabled)s,
    next_at = coalesce(%(next_at)s, next_at),
    updated_at = coalesce(%(now)s::timestamptz, now())
where name = %(name)s
returning name, cron, timezone, type, payload, queue, priority, max_attempts, missed, enabled,
       last_fired, next_at, created_at, updated_at, group_key as "group", flow_keys;

-- name: schedules_remove
-- Delete a schedule; jobs it already enqueued stay.
delete from tickq.schedules where name = %(name)s returning name;

-- name: schedules_due
-- Names of enabled schedules whose next occurrence has come (schedules_due_idx).
select name from tickq.schedules
where enabled and next_at <= coalesce(%(now)s::timestamptz, now())
order by next_at, name;

-- name: schedules_lock
-- Take one due schedule for this scheduler run. SKIP LOCKED: a schedule another run is
-- firing right now is theirs; after they commit its next_at is in the future and it no
-- longer matches, so overlapping runs never fire one occurrence twice.
select name, cron, timezone, type, payload, queue, priority, max_attempts, missed, enabled,
       last_fired, next_at, created_at, updated_at, group_key as "group", flow_keys
from tickq.schedules
where name = %(name)s and enabled and next_at <= coalesce(%(now)s::timestamptz, now())
for update skip locked;

-- name: schedules_advance
-- Mark occurrences up to now as handled, in the transaction that enqueued the fired one.
update tickq.schedules
set last_fired = coalesce(%(fired)s, last_fired),
    next_at = %(next_at)s,
    updated_at = coalesce(%(now)s::timestamptz, now())
where name = %(name)s;
