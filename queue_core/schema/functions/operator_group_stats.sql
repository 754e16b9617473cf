-- Per queue and fairness group, across every user: jobs runnable now, running, and the
-- oldest runnable age (tickq.jobs_group_stats, the store's group stats, read with the
-- owner's rights).
create or replace function tickq.operator_group_stats(p_now timestamptz)
    returns table (queue text, group_key text, waiting bigint, running bigint,
                   oldest_runnable_seconds double precision)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select s.queue, s.group_key, s.waiting, s.running, s.oldest_runnable_seconds
from tickq.jobs_group_stats(p_now) s
order by s.queue, s.group_key
$$;

-- Operators read counts across every user.
revoke all on function tickq.operator_group_stats(timestamptz) from public;
grant execute on function tickq.operator_group_stats(timestamptz) to tickq_operator;
