-- Emptying the jobs (tests, benchmarks, a reset) empties the keys with them. A delete, not
-- a truncate: a TRUNCATE that names both tables is still using the key table here.
create or replace function tickq.job_keys_truncate() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_keys;
    return null;
end $$;

-- Functions that only their triggers, maintenance or the migrator call: nobody else.
revoke all on function tickq.job_keys_truncate() from public;
