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
-- The chosen jobs are leased by tickq.jobs_lease, the lease rule of every claim; what a
-- type may start is tickq.type_allowance, its rate log tickq.type_limits_log (the rules
-- tickq.claim_fair applies too). While any flow limit or hold exists, the candidates pass
-- through tickq.flow_admit as well (as in tickq.claim_flow), looking past blocked keys.
-- p_seed: the lease's seed (see tickq.jobs_lease), drawn there when null.
-- Its order and runnable condition are the plain claim's (queries.sql's pick_runnable and
-- pick_in_claim_order), held to them by tests/unit/test_claim_order_shared.py.
create or replace function tickq.claim_limited(
    p_queues text[], p_limit integer, p_lease_seconds integer, p_now timestamptz,
    p_seed uuid default null)
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
    v_flowing  boolean;
    v_keys_out text[] := '{}';
    v_flow     record;
    v_admitted uuid[];
begin
    -- Flow limits in play: their blocked keys are looked past, like blocked types.
    v_flowing := exists (select from tickq.flow_limits)
                 or exists (select from tickq.flow_holds h where h.until > v_now);
    if v_flowing then
        v_keys_out := tickq.flow_blocked(v_now);
    end if;

    -- The types at their limit now (none more of them may start).
    select coalesce(array_agg(a.type), '{}') into v_blocked
    from tickq.type_allowance(array(select type from tickq.type_limits), v_now, 1) a
    where a.n <= 0;

    while v_claimed < p_limit and v_pass < 4 loop
        v_pass := v_pass + 1;
        if array_length(p_queues, 1) = 1 then
            -- One queue: jobs_claim_idx delivers rows in claim order (see jobs_claim).
            select coalesce(array_agg(c.id), '{}'), coalesce(array_agg(c.type), '{}')
            into v_ids, v_types
            from (select id, type from tickq.jobs
                  where status in ('queued', 'retrying') and queue = p_queues[1]
                    and run_after <= v_now and type <> all(v_blocked)
                    and not (flow_keys && v_keys_out)
                  order by priority desc, owner_priority desc, run_after, created_at
                  limit p_limit - v_claimed
                  for update skip locked) c;
        else
            select coalesce(array_agg(c.id), '{}'), coalesce(array_agg(c.type), '{}')
            into v_ids, v_types
            from (select id, type from tickq.jobs
                  where status in ('queued', 'retrying') and queue = any(p_queues)
                    and run_after <= v_now and type <> all(v_blocked)
                    and not (flow_keys && v_keys_out)
                  order by priority desc, owner_priority desc, run_after, created_at
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
        if v_flowing then
            v_flow := tickq.flow_admit(v_ids, v_start);
            v_admitted := v_flow.admitted;
            v_keys_out := v_keys_out || v_flow.blocked;
        end if;

        return query
        with allowance as (
            select * from tickq.type_allowance(v_locked, v_start, p_limit)
        ), ranked as (
            select c.id, c.type,
                   row_number() over (partition by c.type order by c.ord) as rank
            from unnest(v_ids, v_types) with ordinality c (id, type, ord)
            where not v_flowing or c.id = any(v_admitted)
        ), chosen as (
            select r.id
            from ranked r left join allowance a on a.type = r.type
            where (a.type is null and r.type <> all(v_limited)) or r.rank <= a.n
        ), claimed as materialized (
            select * from tickq.jobs_lease(array(select id from chosen), p_lease_seconds, v_start,
                                          p_seed)
        ), logged as (
            -- One row, always: joined below, it runs once the jobs are claimed.
            select tickq.type_limits_log(array(select type from claimed), v_start),
                   case when v_flowing then tickq.flow_log(
                       array(select k from claimed c, unnest(c.flow_keys) k), v_start) end
        )
        select c.* from claimed c cross join logged;

        get diagnostics v_rows = row_count;
        v_claimed := v_claimed + v_rows;
        -- Every candidate was taken: the queue has no more for us.
        exit when v_rows = cardinality(v_ids);
        -- Some were held back by a limit: look past those types in the next pass, unless
        -- only their flow keys held them back (those keys are looked past already).
        if not v_flowing or v_rows < cardinality(v_admitted) then
            v_blocked := v_blocked || v_limited;
        end if;
    end loop;
end $$;
