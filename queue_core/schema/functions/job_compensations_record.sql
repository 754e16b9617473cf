-- Record the compensation of jobs the reclaim sent back to run their undos (the status each
-- ends in, the error that ended it), keeping one begun already. A function, called only
-- when there is one: an insert in the reclaim's own statement would open job_step_tries
-- and its index on every tick, for the nearly always empty set.
create or replace function tickq.job_compensations_record(
    p_ids uuid[], p_ends text[], p_errors text[], p_at timestamptz
) returns integer
    language sql volatile
    as $$
    with kept as (
        insert into tickq.job_step_tries (job_id, kind, name, tries, error, at)
        select c.id, 'compensation', c.ends, 0, c.error, p_at
        from unnest(p_ids, p_ends, p_errors) as c (id, ends, error)
        on conflict (job_id, kind, name) do nothing
        returning job_id
    )
    select count(*)::integer from kept
$$;
