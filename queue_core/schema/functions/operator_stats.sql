-- Operators: counts across every user, nothing else. A login in tickq_operator (the API's,
-- so /admin/stats works) can call this function and touch no row. `suspended`: of the
-- queued, those queued with a wait (a durable job's suspension), which are not runnable.
create function tickq.operator_stats(p_now timestamptz)
    returns table (queue text, type text, status text, count bigint,
                   oldest_runnable_seconds double precision, suspended bigint)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select j.queue, j.type, j.status, count(*),
       extract(epoch from coalesce(p_now, now())
               - min(j.run_after) filter (
                   where j.status in ('queued', 'retrying')
                     and j.run_after <= coalesce(p_now, now())))::double precision,
       count(*) filter (where j.status = 'queued' and j.wait_kind is not null)
from tickq.jobs j
group by j.queue, j.type, j.status
order by j.queue, j.type, j.status
$$;
