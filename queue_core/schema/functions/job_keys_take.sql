-- A keyed job takes its idempotency key in tickq.job_keys whichever path writes it: an
-- insert of any kind (tickq's enqueue statements, tickq.enqueue, a plain INSERT, COPY;
-- trigger jobs_key_insert) and a dead or cancelled job sent back to the queue (jobs_retry,
-- operator_retry; trigger jobs_key_take). A key already held by another job fails the
-- statement with a unique violation (SQLSTATE 23505) and changes nothing, as the unique
-- index made it fail before the keys moved to their own table. Concurrent takers of one
-- key wait on the first one's uncommitted row (ON CONFLICT): exactly one of them holds it.
--
-- tickq's own enqueue statements take the key themselves first (ON CONFLICT DO NOTHING
-- tells them the holder without failing the batch) and insert only the jobs whose key
-- they won, so the row is found here held by this very job: one probe of the key's index
-- entry, and nothing is written twice.
create or replace function tickq.job_keys_take() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    perform from tickq.job_keys k
    where k.idempotency_key = new.idempotency_key
      and k.user_id is not distinct from new.user_id
      and k.job_id = new.id;
    if found then
        return new;
    end if;
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

-- Functions that only their triggers, maintenance or the migrator call: nobody else.
revoke all on function tickq.job_keys_take() from public;
