-- A job's id never changes: the side tables and tickq.job_ids name it (the jobs_id_fixed
-- trigger, on an update that sets the id).
create or replace function tickq.jobs_id_fixed() returns trigger
    language plpgsql
    as $$
begin
    if new.id is distinct from old.id then
        raise exception 'tickq: a job''s id never changes (% -> %)', old.id, new.id
            using errcode = 'TQ422', detail = 'id';
    end if;
    return new;
end $$;

-- Functions that only their triggers, maintenance or the migrator call: nobody else.
revoke all on function tickq.jobs_id_fixed() from public;
