-- Send dead (or, by id, cancelled) jobs back to the queue with fresh attempts: the one retry
-- of the store (a worker's, the CLI's, `retry_dead`) and of tickq.retry (an application
-- user's, p_owner its user: only that owner's jobs). A job whose idempotency key a live job
-- has taken meanwhile (tickq.job_keys) is skipped, and so is all but the newest of several
-- finished jobs sharing one key, since the key can be live only once (a job that takes the
-- key between this check and the update makes the statement fail in the jobs_key_take
-- trigger, changing nothing); and so is a job with a parent that has not succeeded
-- (dependencies), which must not run yet. Null filters match every job.
create or replace function tickq.jobs_retry(
    p_statuses text[],
    p_ids uuid[],
    p_types text[],
    p_queues text[],
    p_limit integer,
    p_now timestamptz,
    p_owner uuid
) returns setof tickq.jobs
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    return query
    with candidates as (
        select j.id, j.idempotency_key, j.user_id, j.finished_at
        from tickq.jobs j
        where j.status = any(p_statuses)
          and (p_ids is null or j.id = any(p_ids))
          and (p_types is null or j.type = any(p_types))
          and (p_queues is null or j.queue = any(p_queues))
          and (p_owner is null or j.user_id = p_owner)
        order by j.finished_at
        limit p_limit
        for update skip locked
    ), chosen as (
        select c.id from candidates c
        where not exists (select from tickq.job_dependencies d
                          join tickq.jobs p on p.id = d.parent_id
                          where d.child_id = c.id and p.status <> 'succeeded')
          and (c.idempotency_key is null
           or (not exists (select from tickq.job_keys k
                           where k.idempotency_key = c.idempotency_key
                             and k.user_id is not distinct from c.user_id)
               and not exists (select from candidates n
                               where n.idempotency_key = c.idempotency_key
                                 and n.user_id is not distinct from c.user_id
                                 and (n.finished_at, n.id) > (c.finished_at, c.id))))
    ), retried as (
        update tickq.jobs j
        set status = 'queued',
            attempts = 0,
            -- Its attempts start over, so does a compensation's count of them, and its
            -- max_attempts is the declared one again: the attempts a compensation added
            -- were for its undos, not for the runs from scratch a retry gives.
            max_attempts = coalesce(j.declared_max_attempts, j.max_attempts),
            declared_max_attempts = null,
            compensation_attempts = null,
            run_after = p_now,
            cancel_requested = false,
            finished_at = null,
            updated_at = p_now
        from chosen
        where j.id = chosen.id
        returning j as job
    )
    select (r.job).* from retried r;
end $$;

-- What those functions run, which take an owner or a clock as arguments: the workers'
-- alone (tickq.enqueue's trusted path, the store's statements).
revoke all on function tickq.jobs_retry(text[], uuid[], text[], text[], integer, timestamptz, uuid) from public;
grant execute on function tickq.jobs_retry(text[], uuid[], text[], text[], integer, timestamptz, uuid) to tickq_worker;
