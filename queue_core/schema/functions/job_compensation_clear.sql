-- A retry that keeps a compensated job's steps forgets those its undos undid, and the
-- compensation, so the job runs them again instead of compensating at once: the store's
-- and tickq.retry's (without fresh or from_step). Returns the names of the records it
-- forgot.
create or replace function tickq.job_compensation_clear(p_id uuid) returns setof text
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    return query
    with target as materialized (
        select j.id from tickq.jobs j
        where j.id = p_id and j.status in ('dead', 'cancelled')
        for update
    ), undone as materialized (
        select t.name from tickq.job_step_tries t, target
        where t.job_id = target.id and t.kind = 'undo' and t.done_at is not null
    ), steps as (
        delete from tickq.job_steps s using target
        where s.job_id = target.id and s.name in (select u.name from undone u)
    )
    delete from tickq.job_step_tries t using target
    where t.job_id = target.id and t.kind in ('compensation', 'undo')
    returning t.name;
end $$;

-- What those functions run, which take an owner or a clock as arguments: the workers'
-- alone (tickq.enqueue's trusted path, the store's statements).
revoke all on function tickq.job_compensation_clear(uuid) from public;
grant execute on function tickq.job_compensation_clear(uuid) to tickq_worker;
