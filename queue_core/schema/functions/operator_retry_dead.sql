-- Retry every dead job of these types and queues, only if there are exactly p_expected of
-- them (the count the operator confirmed); otherwise nothing changes and SQLSTATE TQ409
-- reports the current count in its detail.
create or replace function tickq.operator_retry_dead(
    p_types text[], p_queues text[], p_expected bigint, p_now timestamptz)
    returns table (id uuid, status text, outcome text)
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_ids uuid[];
begin
    select array_agg(j.id) into v_ids
    from (select j.id from tickq.jobs j
          where j.status = 'dead'
            and (p_types is null or j.type = any(p_types))
            and (p_queues is null or j.queue = any(p_queues))
          limit p_expected + 1
          for update) j;
    if coalesce(cardinality(v_ids), 0) <> p_expected then
        raise exception 'tickq: the dead jobs changed since they were counted'
            using errcode = 'TQ409',
                  detail = tickq.operator_count_dead(p_types, p_queues)::text;
    end if;
    return query select * from tickq.operator_retry(v_ids, p_now);
end $$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.operator_retry_dead(text[], text[], bigint, timestamptz) from public;
grant execute on function tickq.operator_retry_dead(text[], text[], bigint, timestamptz) to tickq_operator, tickq_worker;
