-- Forget the steps, signals and wait of a finished (dead or cancelled) job, before a fresh
-- retry sends it back: the store's and tickq.retry's (with fresh). Returns the job's id; no
-- row: the job is not dead or cancelled.
create or replace function tickq.job_durable_clear(p_id uuid) returns setof uuid
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    return query
    with target as materialized (
        select j.id from tickq.jobs j
        where j.id = p_id and j.status in ('dead', 'cancelled')
        for update
    ), steps as (
        delete from tickq.job_steps s using target where s.job_id = target.id
    ), signals as (
        delete from tickq.job_signals g using target where g.job_id = target.id
    ), tries as (
        delete from tickq.job_step_tries t using target where t.job_id = target.id
    ), children as (
        delete from tickq.job_children k using target where k.parent_id = target.id
    )
    update tickq.jobs j
    set resumes = null, wait_kind = null, wait_name = null, wait_until = null, signals = null
    from target
    where j.id = target.id
    returning j.id;
end $$;

-- What those functions run, which take an owner or a clock as arguments: the workers'
-- alone (tickq.enqueue's trusted path, the store's statements).
revoke all on function tickq.job_durable_clear(uuid) from public;
grant execute on function tickq.job_durable_clear(uuid) to tickq_worker;
