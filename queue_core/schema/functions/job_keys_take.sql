-- A dead or cancelled job sent back to the queue (jobs_retry, operator_retry) takes its key
-- again. If another job took the key meanwhile the statement fails with a unique violation,
-- as the unique index made it fail before, and changes nothing.
create function tickq.job_keys_take() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    insert into tickq.job_keys (idempotency_key, user_id, job_id)
    values (new.idempotency_key, new.user_id, new.id)
    on conflict do nothing;
    if not found then
        raise exception 'tickq: idempotency key % is held by another live job',
            new.idempotency_key
            using errcode = 'unique_violation', detail = new.id::text;
    end if;
    return new;
end $$;
