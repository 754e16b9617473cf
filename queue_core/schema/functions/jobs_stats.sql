-- Counts per queue, type and status, the age of the oldest runnable job of each, and how
-- many of the queued are suspended (queued with a wait: not runnable depth): the one
-- body of the store's stats (jobs_stats; row-level security keeps an application user to
-- its own jobs) and of tickq.operator_stats (every user's, for operators). Security invoker,
-- plain SQL without settings, so a statement that reads it is planned as if it were
-- written there.
create or replace function tickq.jobs_stats(p_now timestamptz)
    returns table (queue text, type text, status text, count bigint,
                   oldest_runnable_seconds double precision, suspended bigint)
    language sql stable
    as $$
select j.queue, j.type, j.status, count(*),
       extract(epoch from coalesce(p_now, now())
               - min(j.run_after) filter (
                   where j.status in ('queued', 'retrying')
                     and j.run_after <= coalesce(p_now, now())))::double precision,
       count(*) filter (where j.status = 'queued' and j.wait_kind is not null)
from tickq.jobs j
group by j.queue, j.type, j.status
$$;

-- The reads that the store's statements and the operator's functions share (stats, group
-- stats, search): security invoker, so an application user's call stays under row-level
-- security; the operator's security-definer functions read every user's jobs through them.
revoke all on function tickq.jobs_stats(timestamptz) from public;
grant execute on function tickq.jobs_stats(timestamptz) to tickq_app, tickq_worker;
