-- Operators: counts across every user, nothing else (tickq.jobs_stats, the store's stats,
-- read with the owner's rights). A login in tickq_operator (the API's, so /admin/stats
-- works) can call this function and touch no row. `suspended`: of the queued, those queued
-- with a wait (a durable job's suspension), which are not runnable.
create or replace function tickq.operator_stats(p_now timestamptz)
    returns table (queue text, type text, status text, count bigint,
                   oldest_runnable_seconds double precision, suspended bigint)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select s.queue, s.type, s.status, s.count, s.oldest_runnable_seconds, s.suspended
from tickq.jobs_stats(p_now) s
order by s.queue, s.type, s.status
$$;

-- Operators read counts across every user.
revoke all on function tickq.operator_stats(timestamptz) from public;
grant execute on function tickq.operator_stats(timestamptz) to tickq_operator;
