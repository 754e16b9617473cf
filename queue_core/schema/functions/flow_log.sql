-- Log the starts of the claimed jobs' rate-limited keys at p_at (one row per key and job),
-- and drop the key's starts older than its period (a minute's margin for claims whose
-- clocks are behind). Called by every claim with the keys of the jobs it leased.
create or replace function tickq.flow_log(p_keys text[], p_at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
declare
    v_logged integer;
begin
    if cardinality(p_keys) = 0 then
        return 0;
    end if;
    insert into tickq.flow_starts (key, at)
    select k, p_at
    from unnest(p_keys) k cross join lateral tickq.flow_limit_of(k) g
    where g.rate_limit is not null;
    get diagnostics v_logged = row_count;
    if v_logged > 0 then
        delete from tickq.flow_starts f
        using (select distinct k from unnest(p_keys) k) k
        cross join lateral tickq.flow_limit_of(k.k) g
        where f.key = k.k and g.rate_limit is not null
          and f.at <= p_at - g.rate_period_seconds * interval '1 second' - interval '1 minute';
    end if;
    return v_logged;
end $$;

-- The flow limits' rules: the claims (which run as the worker) call them; nobody else.
revoke all on function tickq.flow_log(text[], timestamptz) from public;
grant execute on function tickq.flow_log(text[], timestamptz) to tickq_worker;
