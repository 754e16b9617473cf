-- The task catalogue's table (queue_core/postgres/catalog.py).
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

-- name: task_catalog_publish
-- Publish a registry's tasks: each type's defaults and settings, with the code version
-- that declared them, replacing what an earlier publication said of the same types.
insert into tickq.task_catalog as c (type, defaults, settings, code_version, published_at)
select t.type, t.defaults, t.settings, %(code_version)s, now()
from unnest(%(types)s::text[], %(defaults)s::jsonb[], %(settings)s::jsonb[])
    as t (type, defaults, settings)
on conflict (type) do update
    set defaults = excluded.defaults, settings = excluded.settings,
        code_version = excluded.code_version, published_at = excluded.published_at
returning c.type;

-- name: task_catalog_list
-- The catalogue as `tickq tasks` lists it.
select type, defaults, settings, code_version, published_at
from tickq.task_catalog
order by type;
