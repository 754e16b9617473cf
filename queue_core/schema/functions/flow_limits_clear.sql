-- Remove a prefix's limits (its keys fall to a shorter limited prefix, or go free); no row
-- when it had none.
create or replace function tickq.flow_limits_clear(p_prefix text)
    returns table (prefix text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
delete from tickq.flow_limits l where l.prefix = p_prefix returning l.prefix
$$;

-- The flow limits' operations: operators (the console) and workers (the CLI) call them.
revoke all on function tickq.flow_limits_clear(text) from public;
grant execute on function tickq.flow_limits_clear(text) to tickq_operator, tickq_worker;
