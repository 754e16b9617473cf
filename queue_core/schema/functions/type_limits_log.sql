-- Record in the rate logs of their types the jobs a claim just started at p_at (p_types,
-- one entry per job), dropping entries older than each type's period; returns how many
-- types were logged. Called by tickq.claim_limited and tickq.claim_fair while they hold
-- the types' limit rows, so the clock of a log only moves forward.
create or replace function tickq.type_limits_log(p_types text[], p_at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
declare
    v_logged integer;
begin
    update tickq.type_limits l
    set recent_at = array(
            select e.at from unnest(l.recent_at) e (at)
            where e.at > p_at - l.rate_period_seconds * interval '1 second'
            order by e.at) || p_at,
        recent_n = array(
            select e.n from unnest(l.recent_at, l.recent_n) e (at, n)
            where e.at > p_at - l.rate_period_seconds * interval '1 second'
            order by e.at) || s.n,
        updated_at = p_at
    from (select t.type, count(*)::integer as n from unnest(p_types) t (type)
          group by t.type) s
    where l.type = s.type and l.rate_limit is not null;
    get diagnostics v_logged = row_count;
    return v_logged;
end $$;
