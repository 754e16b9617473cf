-- The flow limit that governs a key: its longest limited prefix (none: the key is free).
-- The one rule of which prefix governs, read by tickq.flow_blocked, tickq.flow_admit and
-- tickq.flow_log.
create or replace function tickq.flow_limit_of(p_key text)
    returns table (prefix text, max_running integer, rate_limit integer,
                   rate_period_seconds double precision)
    language sql stable
    as $$
    select l.prefix, l.max_running, l.rate_limit, l.rate_period_seconds
    from tickq.flow_limits l
    where starts_with(p_key, l.prefix)
    order by char_length(l.prefix) desc
    limit 1
$$;

-- The flow limits' rules: the claims (which run as the worker) call them; nobody else.
revoke all on function tickq.flow_limit_of(text) from public;
grant execute on function tickq.flow_limit_of(text) to tickq_worker;
