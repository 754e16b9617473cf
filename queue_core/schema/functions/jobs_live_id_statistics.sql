-- Lookups of live jobs by id plan as lookups of unique ids, whatever ANALYZE last saw.
--
-- tickq.jobs_live is small and often analyzed while the queue is empty. Without a row of
-- pg_statistic for its ids, the planner takes "id = any(<ten ids>)" for 5 % of the
-- partition (ten times its default 1/200 per value), and the generic plans of prepared
-- statements and of the claim functions' cache then scanned the whole partition once or
-- twice per batch when a backlog arrived, until autovacuum analyzed it again. With a row
-- saying the ids are distinct (stadistinct -1), the same lookup is estimated at one row
-- per id, and the id index is taken at any size.
--
-- Three facts of PostgreSQL (15 to 18) make that row last without any cost to a job:
-- * ANALYZE of an empty table leaves the existing pg_statistic rows alone (it writes rows
--   only from a non-empty sample), and VACUUM, VACUUM FULL and TRUNCATE never touch them.
-- * The column's n_distinct option (tables.sql) makes every later ANALYZE write -1 for the
--   ids, whatever its sample.
-- * ANALYZE samples rows its own transaction inserted as live: placeholder jobs inserted,
--   analyzed and deleted in this transaction give the partition its rows, and no other
--   session ever sees them. They go into jobs_live directly, so the triggers on tickq.jobs
--   (the enqueue notification, the forget trigger of deletes) do not fire.
-- Extended statistics cannot say it: CREATE STATISTICS needs at least two columns.
--
-- The status column is analyzed with them: two queued placeholders give it what an ANALYZE
-- of a backlog gives (every row queued). Without it, the planner takes "status in (<the
-- live list>)" for 2 % of the partition, expects one job where a batch finds a hundred,
-- and may join a batch's outcomes to its jobs by a nested loop that compares every pair
-- (a drain at batch 100 ran at 0.65x the speed of one without any statistics; with the
-- status too, 0.95x, and 2.0x at batch 10). Other columns keep no statistics until autovacuum
-- analyzes the partition with jobs in it, which then replaces these.
--
-- Statistics are not carried by a dump and restore: `tickq migrate` calls this every run
-- (queue_core/migrate.py).
create or replace function tickq.jobs_live_id_statistics() returns boolean
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
-- Whether it had to write the rows (true) or found them (false).
declare
    v_placeholders uuid[] := array[gen_random_uuid(), gen_random_uuid()];
begin
    if exists (
        select from pg_stats
        where schemaname = 'tickq' and tablename = 'jobs_live' and attname = 'id'
          and not inherited
    ) then
        return false;
    end if;
    insert into tickq.jobs_live (id, type)
    select p, 'tickq.statistics' from unnest(v_placeholders) p;
    analyze tickq.jobs_live (id, status);
    delete from tickq.jobs_live where id = any(v_placeholders);
    return true;
end $$;

-- Functions that only their triggers, maintenance or the migrator call: nobody else.
revoke all on function tickq.jobs_live_id_statistics() from public;
