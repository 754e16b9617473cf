-- How many more jobs each of the given limited types may start at p_at (at most p_limit):
-- its cap less the jobs of it running, and its rate less the starts its rate log holds
-- within the period, whichever is less; with its cap per group. The one rule of the type
-- limits, which tickq.claim_limited and tickq.claim_fair both apply. STABLE, so it counts
-- with the snapshot of the claim statement that calls it, taken after the limit rows were
-- locked: running + claimed never exceeds a cap.
create or replace function tickq.type_allowance(p_types text[], p_at timestamptz, p_limit integer)
    returns table (type text, n bigint, per_group integer)
    language sql stable
    as $$
    select l.type,
           least(
               coalesce(l.max_running - (select count(*) from tickq.jobs r
                                         where r.status = 'running' and r.type = l.type),
                        p_limit),
               coalesce(l.rate_limit - (select coalesce(sum(e.n), 0)
                                        from unnest(l.recent_at, l.recent_n) e (at, n)
                                        where e.at > p_at - l.rate_period_seconds
                                                     * interval '1 second'),
                        p_limit)),
           l.max_running_per_group
    from tickq.type_limits l
    where l.type = any(p_types)
$$;
