-- Insert checked plain requests (tickq.enqueue_job with p_defer) in one statement: the
-- columns an enqueue sets; the rest take the table's defaults.
create or replace function tickq.enqueue_rows(p_rows tickq.jobs[]) returns void
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    if cardinality(p_rows) > 0 then
        insert into tickq.jobs (
            id, queue, type, user_id, payload, max_attempts, priority, run_after,
            lease_seconds, timeout_seconds, backoff_base, backoff_factor, backoff_max,
            backoff_jitter, group_key, flow_keys, created_at, updated_at)
        select r.id, r.queue, r.type, r.user_id, r.payload, r.max_attempts, r.priority,
               r.run_after, r.lease_seconds, r.timeout_seconds, r.backoff_base,
               r.backoff_factor, r.backoff_max, r.backoff_jitter, r.group_key, r.flow_keys,
               r.created_at, r.updated_at
        from unnest(p_rows) r;
    end if;
end $$;

-- What those functions run, which take an owner or a clock as arguments: the workers'
-- alone (tickq.enqueue's trusted path, the store's statements).
revoke all on function tickq.enqueue_rows(tickq.jobs[]) from public;
grant execute on function tickq.enqueue_rows(tickq.jobs[]) to tickq_worker;
