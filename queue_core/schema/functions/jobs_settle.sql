-- Settle the children of jobs that just finished: release those whose last parent
-- succeeded, cancel every waiting descendant of a dead or cancelled one. Called by each
-- statement that finishes jobs (jobs_finish_and_claim, jobs_reclaim, jobs_cancel), in its
-- transaction, only for finished jobs with has_children.
--
-- Bounded: this statement settles at most tickq.settle_budget children (a setting; 1000
-- when unset) through tickq.jobs_settle_run, which records what is left in
-- tickq.job_settlements in this same transaction, for later short transactions
-- (tickq.jobs_settle_pending) to finish. So a parent of 100,000 children costs the batch
-- that finishes it about as much as one of 1,000, and no child is forgotten.
--
-- VOLATILE on purpose: each statement below takes a fresh snapshot. A child enqueued while
-- its parent was finishing locked the parent first (jobs_parents_lock), so the finishing
-- statement waited for that enqueue to commit; its own snapshot predates the child, but
-- these statements see it. Either the enqueue saw the parent finished and did not count it
-- (its edge is not counted), or it counted it and is released here or by the settlement
-- left behind: never both, never neither.
create or replace function tickq.jobs_settle(parents uuid[], statuses text[], at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
declare
    v_settled integer;
begin
    -- Successes first, then failures by id: a descendant reached from several failed jobs
    -- at once is cancelled naming the least of them.
    v_settled := tickq.jobs_settle_run(
        array(select row(p.id, p.status, p.id, p.status, null::uuid, null::uuid,
                         at)::tickq.job_settlements
              from unnest(parents, statuses) as p (id, status)
              where p.status in ('succeeded', 'dead', 'cancelled')
              order by p.status <> 'succeeded', p.id),
        coalesce(nullif(current_setting('tickq.settle_budget', true), '')::integer, 1000),
        at);
    -- Jobs that are workflow children or parents (job.map, job.call) settle that side too.
    return v_settled + tickq.job_children_settle(parents, statuses, at);
end $$;
