-- Emptying the jobs (tests, benchmarks, a reset) empties what hung on them, as TRUNCATE ...
-- CASCADE would through foreign keys: the tables of tickq.jobs_forget, the keys but through
-- tickq.job_keys_truncate, the other trigger a TRUNCATE of tickq.jobs fires. A delete, not a
-- truncate: a TRUNCATE that names these tables too is still using them here.
create or replace function tickq.jobs_forget_all() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_steps;
    delete from tickq.job_signals;
    delete from tickq.job_dependencies;
    delete from tickq.job_settlements;
    delete from tickq.job_gates;
    delete from tickq.job_step_tries;
    delete from tickq.job_children;
    delete from tickq.job_ids;
    return null;
end $$;

-- Functions that only their triggers, maintenance or the migrator call: nobody else.
revoke all on function tickq.jobs_forget_all() from public;
