-- Job dependencies (SPEC §9): a job may wait for parent jobs. It is `waiting` while any parent
-- is unfinished, released to `queued` in the transaction of its last parent's success, and
-- cancelled (with every waiting descendant) in the transaction of a parent's failure.

alter table tickq.jobs drop constraint jobs_status_check;
alter table tickq.jobs add constraint jobs_status_check check (
    status in ('waiting', 'queued', 'running', 'retrying', 'succeeded', 'dead', 'cancelled'));

-- pending_parents: parents not yet succeeded; the last success brings it to 0 and releases
-- the job, so a release costs one decrement per finished parent, never a recount.
-- has_children: set on a parent when a dependent job is enqueued. Finishing a job looks for
-- children only when it is set, so jobs without children (nearly all) pay one boolean test
-- and no index probe. Both are plain columns of existing rows: adding them rewrites nothing.
alter table tickq.jobs
    add column pending_parents integer not null default 0,
    add column has_children boolean not null default false,
    add constraint jobs_pending_parents_check check (pending_parents >= 0);

-- One row per edge. Both ends cascade on delete: retention only deletes finished jobs, and
-- never a parent an unfinished child still needs (retention_prune), so a deleted end is
-- always a finished job whose edges nobody reads any more.
create table tickq.job_dependencies (
    child_id   uuid not null references tickq.jobs (id) on delete cascade,
    parent_id  uuid not null references tickq.jobs (id) on delete cascade,
    -- The child's owner, so row-level security scopes edges like the jobs they join.
    user_id    uuid,
    primary key (child_id, parent_id)
);

-- Releasing or cancelling the children of a finished parent is a lookup by parent, never a
-- scan (the primary key serves the child's side: its parents, and the cascade on delete).
create index job_dependencies_parent_idx on tickq.job_dependencies (parent_id);

grant select, insert, delete on tickq.job_dependencies to tickq_worker;
grant select, insert on tickq.job_dependencies to tickq_app;

alter table tickq.job_dependencies enable row level security;

-- An application user sees and writes only edges of its own jobs. That both ends are its
-- own is checked by the enqueue, which reads the parents under row-level security
-- (jobs_parents_lock): a policy cannot check it, since the ends are usually inserted by
-- the same statement as the edge, and a policy's subquery does not see them yet.
create policy job_dependencies_owner on tickq.job_dependencies to tickq_app
    using (user_id = tickq.current_user_id())
    with check (user_id = tickq.current_user_id());

create policy job_dependencies_worker on tickq.job_dependencies to tickq_worker
    using (true) with check (true);

-- Applications enqueue dependent jobs (status `waiting`, a pending count) and mark their
-- parents; a restrictive policy keeps inserted statuses to the two an enqueue may choose.
grant insert (status, pending_parents, has_children) on tickq.jobs to tickq_app;
grant update (has_children, error) on tickq.jobs to tickq_app;

create policy jobs_app_insert_status on tickq.jobs as restrictive for insert to tickq_app
    with check (status in ('queued', 'waiting'));

-- The guard of migration 0002, plus what dependencies let an application do: cancel a
-- waiting job (with an error naming the failed parent when a cascade does it) and mark a
-- parent as having children, changing nothing else.
create or replace function tickq.jobs_app_guard() returns trigger
    language plpgsql
    as $$
begin
    if new.status = 'cancelled' and old.status in ('queued', 'retrying', 'waiting')
       and new.attempts = old.attempts then
        return new;
    elsif new.status = 'running' and old.status = 'running' and new.cancel_requested
       and new.attempts = old.attempts and new.run_after = old.run_after then
        return new;
    elsif new.status = 'queued' and old.status in ('dead', 'cancelled') and new.attempts = 0
       and not new.cancel_requested then
        return new;
    elsif new.status = old.status and new.has_children and not old.has_children
       and new.attempts = old.attempts and new.run_after = old.run_after
       and new.finished_at is not distinct from old.finished_at
       and new.cancel_requested = old.cancel_requested
       and new.error is not distinct from old.error then
        return new;
    end if;
    raise exception 'tickq: applications may only cancel or retry jobs (% -> %)',
        old.status, new.status
        using errcode = 'insufficient_privilege';
end $$;

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
    return settled;
end $$;
