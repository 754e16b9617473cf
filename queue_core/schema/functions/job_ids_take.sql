-- Take the ids of the jobs a statement inserted in tickq.job_ids, whose key refuses an id
-- any job holds (the jobs_ids_take trigger, once per insert statement). Security definer:
-- no role but the owner writes the table.
create or replace function tickq.job_ids_take() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    insert into tickq.job_ids (id) select a.id from arrived a;
    return null;
end $$;

-- Functions that only their triggers, maintenance or the migrator call: nobody else.
revoke all on function tickq.job_ids_take() from public;
