-- A job that becomes dead or cancelled, by any path (finish, reclaim, cancel, dependency
-- settlement, the operator functions), lets its key go in the same statement (trigger
-- jobs_key_free, triggers.sql). The row is found by its key through the unique index, and
-- the job id stays in the condition: a job lets go only of the row holding its key for it.
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

-- Functions that only their triggers, maintenance or the migrator call: nobody else.
revoke all on function tickq.job_keys_free() from public;
