-- Settle the children of jobs that just finished: release those whose last parent
-- succeeded, cancel every waiting descendant of a dead or cancelled one. Called by each
-- statement that finishes jobs (jobs_finish_and_claim, jobs_reclaim, jobs_cancel), in its
-- transaction, only for finished jobs with has_children.
--
-- VOLATILE on purpose: each statement below takes a fresh snapshot. A child enqueued while
-- its parent was finishing locked the parent first (jobs_parents_lock), so the finishing
-- statement waited for that enqueue to commit; its own snapshot predates the child, but
-- these statements see it. Either the enqueue saw the parent finished and did not count it,
-- or it counted it and is released here: never both, never neither.
create function tickq.jobs_settle(parents uuid[], statuses text[], at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
declare
    succeeded uuid[];
    failed uuid[];
    doomed_ids uuid[];
    roots uuid[];
    settled integer := 0;
    touched integer;
begin
    select coalesce(array_agg(p.id) filter (where p.status = 'succeeded'), '{}'),
           coalesce(array_agg(p.id) filter (where p.status in ('dead', 'cancelled')), '{}')
    into succeeded, failed
    from unnest(parents, statuses) as p (id, status);

    if cardinality(succeeded) > 0 then
        -- Children are locked in id order, so parents of one fan-in finishing on several
        -- workers at once queue up on the child in one order (no deadlock), and each
        -- decrement applies to the count the previous one left: released exactly once.
        perform from tickq.jobs c
        where c.id in (select d.child_id from tickq.job_dependencies d
                       where d.parent_id = any(succeeded))
          and c.status = 'waiting'
        order by c.id
        for no key update;

        update tickq.jobs c
        set pending_parents = c.pending_parents - d.done,
            status = case when c.pending_parents - d.done = 0 then 'queued' else 'waiting' end,
            updated_at = at
        from (select child_id, count(*)::integer as done
              from tickq.job_dependencies
              where parent_id = any(succeeded)
              group by child_id) d
        where c.id = d.child_id and c.status = 'waiting';
        get diagnostics touched = row_count;
        settled := settled + touched;
    end if;

    if cardinality(failed) > 0 then
        -- Descendants are followed through waiting jobs only: a cancelled job's own
        -- descendants were cancelled with it, and a job past waiting has no unfinished
        -- parent. Each is cancelled naming the failed job it descends from (the least id
        -- when several failed at once).
        with recursive doomed (id, root) as (
            select d.child_id, d.parent_id
            from tickq.job_dependencies d
            join tickq.jobs c on c.id = d.child_id and c.status = 'waiting'
            where d.parent_id = any(failed)
            union
            select d.child_id, doomed.root
            from doomed
            join tickq.job_dependencies d on d.parent_id = doomed.id
            join tickq.jobs c on c.id = d.child_id and c.status = 'waiting'
        )
        select coalesce(array_agg(r.id order by r.id), '{}'),
               coalesce(array_agg(r.root order by r.id), '{}')
        into doomed_ids, roots
        from (select distinct on (id) id, root from doomed order by id, root) r;

        perform from tickq.jobs c
        where c.id = any(doomed_ids) and c.status = 'waiting'
        order by c.id
        for no key update;

        update tickq.jobs c
        set status = 'cancelled',
            error = 'parent ' || r.root || ' is ' || p.status,
            updated_at = at,
            finished_at = at
        from unnest(doomed_ids, roots) as r (id, root)
        join unnest(parents, statuses) as p (id, status) on p.id = r.root
        where c.id = r.id and c.status = 'waiting';
        get diagnostics touched = row_count;
        settled := settled + touched;
    end if;
    -- Jobs that are workflow children or parents (job.map, job.call) settle that side too.
    return settled + tickq.job_children_settle(parents, statuses, at);
end $$;
