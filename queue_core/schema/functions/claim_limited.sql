-- The limited claim. Only used while some type limit exists; the plain jobs_claim stays the
-- hot path otherwise. Each pass:
--   1. skips types already known to be at their limit (read without locks), so a capped
--      type at the head of the queue cannot starve the others;
--   2. locks the best runnable rows as jobs_claim does (SKIP LOCKED);
--   3. locks the limit rows of the capped types among them, in type order (no deadlocks;
--      later passes SKIP LOCKED since they would break that order). Claimers of a capped
--      type take turns here, claimers of other types never touch these rows;
--   4. counts running jobs with a fresh snapshot (a volatile function takes one per
--      statement), which sees every claim committed by the previous holder of the lock,
--      so running + claimed never exceeds the cap and the rate log never over-admits.
-- The chosen jobs are leased by tickq.jobs_lease, the lease rule of every claim.
create function tickq.claim_limited(
    p_queues text[], p_limit integer, p_lease_seconds integer, p_now timestamptz)
    returns setof tickq.jobs
    language plpgsql volatile
    as $$
declare
    v_now      timestamptz := coalesce(p_now, now());
    v_start    timestamptz;
    v_blocked  text[];
    v_ids      uuid[];
    v_types    text[];
    v_limited  text[];
    v_locked   text[];
    v_claimed  integer := 0;
    v_rows     integer;
    v_pass     integer := 0;
begin
    select coalesce(array_agg(l.type), '{}') into v_blocked
    from tickq.type_limits l
    where (l.max_running is not null
           and (select count(*) from tickq.jobs j
                where j.status = 'running' and j.type = l.type) >= l.max_running)
       or (l.rate_limit is not null
           and (select coalesce(sum(r.n), 0) from unnest(l.recent_at, l.recent_n) r (at, n)
                where r.at > v_now - l.rate_period_seconds * interval '1 second')
               >= l.rate_limit);

    while v_claimed < p_limit and v_pass < 4 loop
        v_pass := v_pass + 1;
        if array_length(p_queues, 1) = 1 then
            -- One queue: jobs_claim_idx delivers rows in claim order (see jobs_claim).
            select coalesce(array_agg(c.id), '{}'), coalesce(array_agg(c.type), '{}')
            into v_ids, v_types
            from (select id, type from tickq.jobs
                  where status in ('queued', 'retrying') and queue = p_queues[1]
                    and run_after <= v_now and type <> all(v_blocked)
                  order by priority desc, run_after, created_at
                  limit p_limit - v_claimed
                  for update skip locked) c;
        else
            select coalesce(array_agg(c.id), '{}'), coalesce(array_agg(c.type), '{}')
            into v_ids, v_types
            from (select id, type from tickq.jobs
                  where status in ('queued', 'retrying') and queue = any(p_queues)
                    and run_after <= v_now and type <> all(v_blocked)
                  order by priority desc, run_after, created_at
                  limit p_limit - v_claimed
                  for update skip locked) c;
        end if;
        exit when cardinality(v_ids) = 0;

        select coalesce(array_agg(l.type), '{}') into v_limited
        from tickq.type_limits l where l.type = any(v_types);
        if v_pass = 1 then
            select coalesce(array_agg(s.type), '{}') into v_locked
            from (select l.type from tickq.type_limits l where l.type = any(v_limited)
                  order by l.type for update) s;
        else
            select coalesce(array_agg(s.type), '{}') into v_locked
            from (select l.type from tickq.type_limits l where l.type = any(v_limited)
                  order by l.type for update skip locked) s;
        end if;
        -- Read after the locks are held: the clock of the rate log only moves forward.
        v_start := coalesce(p_now, clock_timestamp());

        return query
        with allowance as (
            select l.type,
                   least(
                       coalesce(l.max_running - (select count(*) from tickq.jobs r
                                                 where r.status = 'running'
                                                   and r.type = l.type), p_limit),
                       coalesce(l.rate_limit - (select coalesce(sum(e.n), 0)
                                                from unnest(l.recent_at, l.recent_n) e (at, n)
                                                where e.at > v_start - l.rate_period_seconds
                                                             * interval '1 second'), p_limit)
                   ) as n
            from tickq.type_limits l
            where l.type = any(v_locked)
        ), ranked as (
            select c.id, c.type,
                   row_number() over (partition by c.type order by c.ord) as rank
            from unnest(v_ids, v_types) with ordinality c (id, type, ord)
        ), chosen as (
            select r.id
            from ranked r left join allowance a on a.type = r.type
            where (a.type is null and r.type <> all(v_limited)) or r.rank <= a.n
        ), claimed as materialized (
            select * from tickq.jobs_lease(array(select id from chosen), p_lease_seconds, v_start)
        ), started as (
            select c.type, count(*)::integer as n from claimed c group by c.type
        ), logged as (
            update tickq.type_limits l
            set recent_at = array(
                    select e.at from unnest(l.recent_at) e (at)
                    where e.at > v_start - l.rate_period_seconds * interval '1 second'
                    order by e.at) || v_start,
                recent_n = array(
                    select e.n from unnest(l.recent_at, l.recent_n) e (at, n)
                    where e.at > v_start - l.rate_period_seconds * interval '1 second'
                    order by e.at) || s.n,
                updated_at = v_start
            from started s
            where l.type = s.type and l.rate_limit is not null
        )
        select * from claimed;

        get diagnostics v_rows = row_count;
        v_claimed := v_claimed + v_rows;
        -- Every candidate was taken: the queue has no more for us.
        exit when v_rows = cardinality(v_ids);
        -- Some were held back by a limit: look past those types in the next pass.
        v_blocked := v_blocked || v_limited;
    end loop;
end $$;
