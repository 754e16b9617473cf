-- Every limited key prefix, by prefix.
create or replace function tickq.flow_limits_list()
    returns table (prefix text, max_running integer, rate_limit integer,
                   rate_period_seconds double precision)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select l.prefix, l.max_running, l.rate_limit, l.rate_period_seconds
from tickq.flow_limits l
order by l.prefix
$$;

-- The flow limits' operations: operators (the console) and workers (the CLI) call them.
revoke all on function tickq.flow_limits_list() from public;
grant execute on function tickq.flow_limits_list() to tickq_operator, tickq_worker;
