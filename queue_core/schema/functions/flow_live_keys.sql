-- The flow keys with live jobs or a live hold, at most p_limit by key: jobs running and
-- waiting (runnable at p_now) of each, the hold's end, and the prefix that governs it
-- (tickq.flow_limit_of). Counts and keys only, never a job: operators may read them.
create or replace function tickq.flow_live_keys(p_now timestamptz, p_limit integer)
    returns table (key text, running bigint, waiting bigint, held_until timestamptz,
                   prefix text)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
with counts as (
    select k as key,
           count(*) filter (where j.status = 'running') as running,
           count(*) filter (where j.status in ('queued', 'retrying')
                              and j.run_after <= coalesce(p_now, now()))
               as waiting
    from tickq.jobs j, unnest(j.flow_keys) k
    where j.status in ('queued', 'running', 'retrying') and j.flow_keys <> '{}'
    group by k
), holds as (
    select h.key, h.until from tickq.flow_holds h
    where h.until > coalesce(p_now, now())
)
select coalesce(c.key, h.key), coalesce(c.running, 0), coalesce(c.waiting, 0), h.until,
       (select g.prefix from tickq.flow_limit_of(coalesce(c.key, h.key)) g)
from counts c full join holds h on h.key = c.key
order by 1
limit p_limit
$$;

-- The flow limits' operations: operators (the console) and workers (the CLI) call them.
revoke all on function tickq.flow_live_keys(timestamptz, integer) from public;
grant execute on function tickq.flow_live_keys(timestamptz, integer)
    to tickq_operator, tickq_worker;
