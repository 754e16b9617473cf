-- Settle the workflow side of jobs that just finished (job.map, job.call): the children of a
-- parent that ended dead or cancelled are cancelled with it (tickq.job_children_cancel: a
-- running one is asked to stop, a saga compensates first), transitively; a child that
-- ended counts down its parent's unfinished children (pending_parents on the suspended
-- parent), releases the next waiting siblings so that at most the step's max_running are
-- runnable at once, and wakes the parent when the last one ended. Called by tickq.jobs_settle, so only for finished jobs with has_children.
--
-- Children are released in their step's order: the runnable ones are always the first
-- max_running + ended of them, so the next to release follow from the count alone (no
-- scan of the siblings). The parent row is locked first, in id order, so children of one
-- parent finishing on several workers at once count down one after another.
create or replace function tickq.job_children_settle(p_ids uuid[], p_statuses text[], p_at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
declare
    v_failed uuid[];
    v_ended uuid[];
    v_touched integer := 0;
    v_n integer;
begin
    select coalesce(array_agg(p.id) filter (where p.status in ('dead', 'cancelled')), '{}'),
           coalesce(array_agg(p.id), '{}')
    into v_failed, v_ended
    from unnest(p_ids, p_statuses) as p (id, status)
    where p.status in ('succeeded', 'dead', 'cancelled');

    if cardinality(v_failed) > 0 then
        v_touched := tickq.job_children_cancel(p_ids, p_statuses, p_at);
    end if;

    -- Only children of a parent waiting for their step count it down; the others stop
    -- here (a parent's cascade above among them, which an application may run: it may
    -- not write the columns below).
    if not exists (select from tickq.job_children k
                   join tickq.jobs p on p.id = k.parent_id
                   where k.child_id = any(v_ended)
                     and p.status in ('waiting', 'queued', 'running', 'retrying')
                     and p.wait_kind = 'children' and p.wait_name = k.step) then
        return v_touched;
    end if;

    perform from tickq.jobs p
    where p.id in (select k.parent_id from tickq.job_children k where k.child_id = any(v_ended))
      and p.status in ('waiting', 'queued', 'running', 'retrying')
    order by p.id
    for no key update;

    with ended as (
        select k.parent_id, k.step, k.max_running, k.siblings, count(*)::integer as n
        from tickq.job_children k
        where k.child_id = any(v_ended)
        group by k.parent_id, k.step, k.max_running, k.siblings
    ), counted as (
        update tickq.jobs p
        set pending_parents = greatest(p.pending_parents - e.n, 0),
            run_after = case when p.pending_parents - e.n <= 0 then least(p.run_after, p_at)
                             else p.run_after end,
            updated_at = p_at
        from ended e
        where p.id = e.parent_id and p.status in ('waiting', 'queued', 'running', 'retrying')
          and p.wait_kind = 'children' and p.wait_name = e.step
        returning p.id, e.step, e.max_running, e.siblings, p.pending_parents as left_after,
                  e.n
    ), released as (
        update tickq.jobs c
        set status = 'queued', updated_at = p_at
        from counted x
        join tickq.job_children k on k.parent_id = x.id and k.step = x.step
            and k.idx >= x.max_running + x.siblings - x.left_after - x.n
            and k.idx < x.max_running + x.siblings - x.left_after
        where c.id = k.child_id and c.status = 'waiting'
        returning c.id
    )
    select (select count(*) from counted) + (select count(*) from released) into v_n;
    return v_touched + v_n;
end $$;
