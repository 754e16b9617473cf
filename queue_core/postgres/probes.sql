-- The store's cached looks at the limit tables and the task catalogue
-- (queue_core/postgres/probes.py).
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

-- name: limits_configured
-- Whether any type limit, any queue limit and any cap per group exist: without them the
-- plain claim and enqueue statements run. And whether this login may write the jobs itself,
-- or goes through the application login's functions (Executor.through_functions). And
-- whether any flow limit or live hold exists: without one the claims never read flow keys.
select exists (select from tickq.type_limits), exists (select from tickq.queue_limits),
       exists (select from tickq.type_limits where max_running_per_group is not null)
       or exists (select from tickq.queue_group_limits),
       has_table_privilege('tickq.jobs', 'INSERT'), tickq.flow_active();

-- name: task_catalog_defaults
-- Every catalogued type's defaults, for enqueues by processes without the handler's module.
select type, defaults from tickq.task_catalog;
