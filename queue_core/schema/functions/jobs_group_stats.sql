-- Per queue and fairness group: jobs runnable now, running, and the age of the oldest
-- runnable job; only groups with live jobs (jobs_fair_idx and the running rows). The one
-- body of the store's group stats (jobs_stats_groups, under row-level security) and of
-- tickq.operator_group_stats (every user's). Security invoker, plain SQL without settings,
-- so a statement that reads it is planned as if it were written there.
create or replace function tickq.jobs_group_stats(p_now timestamptz)
    returns table (queue text, group_key text, waiting bigint, running bigint,
                   oldest_runnable_seconds double precision)
    language sql stable
    as $$
select j.queue, j.group_key::text,
       count(*) filter (where j.status in ('queued', 'retrying')
                          and j.run_after <= coalesce(p_now, now())),
       count(*) filter (where j.status = 'running'),
       extract(epoch from coalesce(p_now, now()) - min(j.run_after) filter (
           where j.status in ('queued', 'retrying')
             and j.run_after <= coalesce(p_now, now())))::double precision
from tickq.jobs j
where j.status in ('queued', 'retrying', 'running')
group by j.queue, j.group_key
$$;

-- The reads that the store's statements and the operator's functions share (stats, group
-- stats, search): security invoker, so an application user's call stays under row-level
-- security; the operator's security-definer functions read every user's jobs through them.
revoke all on function tickq.jobs_group_stats(timestamptz) from public;
grant execute on function tickq.jobs_group_stats(timestamptz) to tickq_app, tickq_worker;
