-- The flow keys that may start no job at p_now: held, at their cap of running jobs, or at
-- their rate in the window ending at p_now. Read without locks, before a claim picks its
-- candidates, so a busy key at the head of the queue cannot starve the others; the claim
-- decides under the keys' locks (tickq.flow_admit), which this only anticipates.
create or replace function tickq.flow_blocked(p_now timestamptz)
    returns text[]
    language plpgsql stable
    as $$
begin
    return array(
        select h.key from tickq.flow_holds h where h.until > p_now
        union
        select r.key
        from (select k as key, count(*) as n
              from tickq.jobs j, unnest(j.flow_keys) k
              where j.status = 'running' and j.flow_keys <> '{}'
              group by k) r
        cross join lateral tickq.flow_limit_of(r.key) g
        where r.n >= g.max_running
        union
        -- One pass over the starts of the longest period (the log holds little more: each
        -- claim prunes its keys' older starts), each key's then counted in its own period.
        select s.key
        from (select f.key, array_agg(f.at) as ats
              from tickq.flow_starts f
              where f.at > p_now - (select max(l.rate_period_seconds) from tickq.flow_limits l)
                               * interval '1 second'
              group by f.key) s
        cross join lateral tickq.flow_limit_of(s.key) g
        where g.rate_limit is not null
          and g.rate_limit <= (select count(*) from unnest(s.ats) a
                               where a > p_now - g.rate_period_seconds * interval '1 second'));
end $$;

-- The flow limits' rules: the claims (which run as the worker) call them; nobody else.
revoke all on function tickq.flow_blocked(timestamptz) from public;
grant execute on function tickq.flow_blocked(timestamptz) to tickq_worker;
