-- Create or change a key prefix's flow limits (queue_core/model/flow.py, which checks them
-- first; the table's checks hold for every role); the next claim applies them. Security
-- definer, so the operator console (tickq_operator, which reads no table) may set them.
create or replace function tickq.flow_limits_set(p_prefix text, p_max_running integer,
                                                 p_rate_limit integer,
                                                 p_rate_period_seconds double precision)
    returns table (prefix text, max_running integer, rate_limit integer,
                   rate_period_seconds double precision)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
insert into tickq.flow_limits as l (prefix, max_running, rate_limit, rate_period_seconds)
values (p_prefix, p_max_running, p_rate_limit, p_rate_period_seconds)
on conflict on constraint flow_limits_pkey do update
    set max_running = excluded.max_running, rate_limit = excluded.rate_limit,
        rate_period_seconds = excluded.rate_period_seconds, updated_at = now()
returning l.prefix, l.max_running, l.rate_limit, l.rate_period_seconds
$$;

-- The flow limits' operations: operators (the console) and workers (the CLI) call them.
revoke all on function tickq.flow_limits_set(text, integer, integer, double precision) from public;
grant execute on function tickq.flow_limits_set(text, integer, integer, double precision)
    to tickq_operator, tickq_worker;
