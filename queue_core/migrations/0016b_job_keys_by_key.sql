-- Key rows are found by their key, and tickq.job_keys loses its index on job ids.
--
-- Every keyed enqueue wrote three index entries for its key row: the unique key (the
-- arbiter of duplicates) and job_keys_job_idx, kept only so that the rows of a job that
-- ends or is deleted could be found by job id. The job that lets a key go knows its key and
-- owner, so the unique index finds the row as well: the free trigger, the deletion trigger
-- and the partition drop now look key rows up by (key, owner, job id), and the second
-- index goes. A bulk keyed enqueue spent 7 % of its statement maintaining it.
--
-- Nothing changes for a job that ends: it still lets go of exactly the row holding its key
-- for it (the job id stays in the condition), and keyless jobs, which hold no row, are
-- still never looked up.

drop index tickq.job_keys_job_idx;

-- Migration 0013's function, finding the row by key.
create or replace function tickq.job_keys_free() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_keys k
    where k.idempotency_key = old.idempotency_key
      and k.user_id is not distinct from old.user_id
      and k.job_id = old.id;
    return new;
end $$;

-- Migration 0014's function, the key rows found by key (keyless deleted jobs match none).
create or replace function tickq.jobs_forget() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_keys k using gone g
    where k.idempotency_key = g.idempotency_key
      and k.user_id is not distinct from g.user_id
      and k.job_id = g.id;
    delete from tickq.job_steps s using gone g where s.job_id = g.id;
    delete from tickq.job_signals s using gone g where s.job_id = g.id;
    delete from tickq.job_dependencies d using gone g where d.child_id = g.id;
    delete from tickq.job_dependencies d using gone g where d.parent_id = g.id;
    return null;
end $$;

-- tickq.jobs_partition_drop (0014) rebuilt from its current definition with only its key
-- deletion changed; a text not found stops the migration.
do $$
declare
    v_old constant text := '''delete from tickq.job_keys k using tickq.%I j''
                           '' where k.job_id = j.id''';
    v_new constant text := '''delete from tickq.job_keys k using tickq.%I j''
                           '' where k.idempotency_key = j.idempotency_key''
                           '' and k.user_id is not distinct from j.user_id''
                           '' and k.job_id = j.id''';
    v_def text := pg_get_functiondef('tickq.jobs_partition_drop'::regproc);
begin
    if position(v_old in v_def) = 0 then
        raise exception 'tickq: tickq.jobs_partition_drop no longer says "%"', v_old;
    end if;
    execute replace(v_def, v_old, v_new);
end $$;
