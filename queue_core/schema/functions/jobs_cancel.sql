-- Cancel jobs not yet running at once (with their waiting descendants) and ask running ones
-- to stop at their next heartbeat: the one cancel of the store (a worker's, the CLI's) and of
-- tickq.cancel (an application user's, p_owner its user: only that owner's jobs). A saga not
-- running that owes undos (tickq.job_compensation_spare) compensates first: its
-- compensation recorded, runnable at once with attempts for its undos, its workflow children
-- cancelled now; its handler runs the undos, then it ends cancelled. It is returned as it is
-- (queued or retrying, not asked to stop), as is one compensating already, which is left to
-- finish. Returns the jobs it changed, as they are now.
create or replace function tickq.jobs_cancel(p_ids uuid[], p_now timestamptz, p_owner uuid)
    returns setof tickq.jobs
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    return query
    with owed as materialized (
        -- Only a job that ran (claimed, or resumed) may have stored a step.
        select j.id,
               case when j.status in ('queued', 'retrying')
                         and (j.attempts > 0 or j.resumes is not null)
                    then tickq.job_compensation_spare(j.id) else 0 end as spare
        from tickq.jobs j
        where j.id = any(p_ids)
          and j.status in ('waiting', 'queued', 'retrying', 'running')
          and (p_owner is null or j.user_id = p_owner)
        -- Locked, so these columns are the row's latest: a job that suspended after this
        -- statement began is seen at rest, and compensates instead of ending without undos.
        for update of j
    ), cancelled as (
        update tickq.jobs j
        set status = case when j.status = 'running' or o.spare is distinct from 0
                          then j.status else 'cancelled' end,
            cancel_requested = (j.status = 'running'),
            run_after = case when j.status <> 'running' and o.spare > 0
                             then least(j.run_after, p_now) else j.run_after end,
            max_attempts = case when j.status <> 'running' and o.spare > 0
                                then greatest(j.max_attempts, j.attempts + o.spare)
                                else j.max_attempts end,
            declared_max_attempts = case when j.status <> 'running' and o.spare > 0
                                         then coalesce(j.declared_max_attempts, j.max_attempts)
                                         else j.declared_max_attempts end,
            compensation_attempts = case when j.status <> 'running' and o.spare > 0
                                         then coalesce(j.compensation_attempts, j.attempts)
                                         else j.compensation_attempts end,
            finished_at = case when j.status = 'running' or o.spare is distinct from 0
                               then null else p_now end,
            updated_at = p_now
        from owed o
        where j.id = o.id
          and j.status in ('waiting', 'queued', 'retrying', 'running')
        returning j as job, j.id, j.status, j.has_children,
            j.status <> 'cancelled' and not j.cancel_requested and o.spare > 0 as begun
    ), begun as (
        insert into tickq.job_step_tries (job_id, kind, name, tries, error, at)
        select c.id, 'compensation', 'cancelled', 0, 'cancelled', p_now
        from cancelled c
        where c.begun
        on conflict (job_id, kind, name) do nothing
    ), settled as (
        select case when count(*) > 0
                    then tickq.jobs_settle(array_agg(c.id), array_agg(c.status), p_now)
               end as children
        from cancelled c
        where c.has_children and c.status = 'cancelled'
    ), compensating as (
        -- The workflow children of a parent that begins compensating are cancelled now.
        select case when count(*) > 0
                    then tickq.job_children_cancel(
                        array_agg(c.id), array_fill('cancelled'::text, array[count(*)::integer]),
                        p_now)
               end as children
        from cancelled c
        where c.has_children and c.begun
    )
    select (c.job).*
    from cancelled c cross join settled cross join compensating;
end $$;

-- What those functions run, which take an owner or a clock as arguments: the workers'
-- alone (tickq.enqueue's trusted path, the store's statements).
revoke all on function tickq.jobs_cancel(uuid[], timestamptz, uuid) from public;
grant execute on function tickq.jobs_cancel(uuid[], timestamptz, uuid) to tickq_worker;
