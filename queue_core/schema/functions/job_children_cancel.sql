-- The workflow children (job.map, job.call) of jobs that ended dead or cancelled, or that
-- began compensating to end so, go with them, transitively: a running child is asked to
-- stop; one not running is cancelled, but for a saga with completed undoable steps
-- (tickq.job_compensation_spare), which begins its compensation instead (recorded, runnable
-- at once with attempts for its undos: its handler runs them, then it ends cancelled), and
-- one compensating already, which is left to finish. Called by tickq.job_children_settle
-- and by the cancels that begin a parent's compensation. Returns the children it touched.
create or replace function tickq.job_children_cancel(p_ids uuid[], p_statuses text[], p_at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
declare
    v_failed uuid[];
    v_doomed uuid[];
    v_owing uuid[];
    v_touched integer := 0;
begin
    select coalesce(array_agg(p.id), '{}') into v_failed
    from unnest(p_ids, p_statuses) as p (id, status)
    where p.status in ('dead', 'cancelled');
    if cardinality(v_failed) = 0 then
        return 0;
    end if;

    update tickq.jobs c
    set cancel_requested = true, updated_at = p_at
    from tickq.job_children k
    where k.parent_id = any(v_failed) and c.id = k.child_id
      and c.status = 'running' and not c.cancel_requested;

    with owed as materialized (
        select c.id, k.parent_id, p.status as parent_status,
               -- Only a child that ran (claimed, or resumed) may have stored a step.
               case when c.status in ('queued', 'retrying')
                         and (c.attempts > 0 or c.resumes is not null)
                    then tickq.job_compensation_spare(c.id) else 0 end as spare
        from tickq.job_children k
        join unnest(p_ids, p_statuses) as p (id, status) on p.id = k.parent_id
        join tickq.jobs c on c.id = k.child_id
        where k.parent_id = any(v_failed) and c.status in ('waiting', 'queued', 'retrying')
    ), gone as (
        update tickq.jobs c
        set status = case when o.spare = 0 then 'cancelled' else c.status end,
            -- Named on the children that were waiting, as the dependency cascade names
            -- them (the only error an application's cancel may write).
            error = case when o.spare = 0 and c.status = 'waiting'
                         then 'parent ' || o.parent_id || ' is ' || o.parent_status
                         else c.error end,
            run_after = case when o.spare > 0 then least(c.run_after, p_at) else c.run_after end,
            max_attempts = case when o.spare > 0
                                then greatest(c.max_attempts, c.attempts + o.spare)
                                else c.max_attempts end,
            declared_max_attempts = case when o.spare > 0
                                         then coalesce(c.declared_max_attempts, c.max_attempts)
                                         else c.declared_max_attempts end,
            compensation_attempts = case when o.spare > 0
                                         then coalesce(c.compensation_attempts, c.attempts)
                                         else c.compensation_attempts end,
            updated_at = p_at,
            finished_at = case when o.spare = 0 then p_at else c.finished_at end
        from owed o
        where c.id = o.id and o.spare is not null
          and c.status in ('waiting', 'queued', 'retrying')
        returning c.id, o.spare, o.parent_id, o.parent_status, c.has_children
    ), begun as (
        insert into tickq.job_step_tries (job_id, kind, name, tries, error, at)
        select g.id, 'compensation', 'cancelled', 0,
               'parent ' || g.parent_id || ' is ' || g.parent_status, p_at
        from gone g
        where g.spare > 0
        on conflict (job_id, kind, name) do nothing
    )
    select coalesce(array_agg(id) filter (where spare = 0), '{}'),
           coalesce(array_agg(id) filter (where spare > 0 and has_children), '{}')
    into v_doomed, v_owing
    from gone;
    if cardinality(v_doomed) > 0 then
        v_touched := v_touched + cardinality(v_doomed) + tickq.jobs_settle(
            v_doomed, array_fill('cancelled'::text, array[cardinality(v_doomed)]), p_at);
    end if;
    if cardinality(v_owing) > 0 then
        v_touched := v_touched + cardinality(v_owing) + tickq.job_children_cancel(
            v_owing, array_fill('cancelled'::text, array[cardinality(v_owing)]), p_at);
    end if;
    return v_touched;
end $$;
