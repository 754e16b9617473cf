-- How many dead jobs of these types and queues exist (every type or queue when null).
create or replace function tickq.operator_count_dead(p_types text[], p_queues text[])
    returns bigint
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select count(*) from tickq.jobs j
where j.status = 'dead'
  and (p_types is null or j.type = any(p_types))
  and (p_queues is null or j.queue = any(p_queues))
$$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.operator_count_dead(text[], text[]) from public;
grant execute on function tickq.operator_count_dead(text[], text[]) to tickq_operator, tickq_worker;
