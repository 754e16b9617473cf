-- The plain claim under flow limits: used instead of jobs_finish_and_claim's pick while any
-- flow limit or hold exists (the plain statements run unchanged otherwise, so jobs without
-- keys pay nothing). Each pass:
--   1. locks the best runnable rows as the plain claim does (SKIP LOCKED), looking past the
--      jobs of keys known to be blocked (tickq.flow_blocked, read once without locks, then
--      grown by each pass), so a busy key at the head of the queue cannot starve the rest;
--   2. keeps those their keys let start (tickq.flow_admit, under the keys' locks) and leases
--      them (tickq.jobs_lease, the lease rule of every claim), logging the starts of
--      rate-limited keys (tickq.flow_log);
--   3. goes on while jobs are wanted and some were held back by a key.
-- The jobs held back stay locked, unleased, until the transaction ends. p_seed: the
-- leases' seed (see tickq.jobs_lease), drawn there when null.
create or replace function tickq.claim_flow(
    p_queues text[], p_limit integer, p_lease_seconds integer, p_now timestamptz,
    p_seed uuid default null)
    returns setof tickq.jobs
    language plpgsql volatile
    as $$
declare
    v_now     timestamptz := coalesce(p_now, now());
    v_blocked text[];
    v_ids     uuid[];
    v_flow    record;
    v_claimed integer := 0;
    v_rows    integer;
    v_pass    integer := 0;
begin
    v_blocked := tickq.flow_blocked(v_now);
    while v_claimed < p_limit and v_pass < 32 loop
        v_pass := v_pass + 1;
        if array_length(p_queues, 1) = 1 then
            -- One queue: jobs_claim_idx delivers rows in claim order (see jobs_claim).
            select coalesce(array_agg(c.id), '{}') into v_ids
            from (select id from tickq.jobs
                  where status in ('queued', 'retrying') and queue = p_queues[1]
                    and run_after <= v_now and not (flow_keys && v_blocked)
                  order by priority desc, owner_priority desc, run_after, created_at
                  limit p_limit - v_claimed
                  for update skip locked) c;
        else
            select coalesce(array_agg(c.id), '{}') into v_ids
            from (select id from tickq.jobs
                  where status in ('queued', 'retrying') and queue = any(p_queues)
                    and run_after <= v_now and not (flow_keys && v_blocked)
                  order by priority desc, owner_priority desc, run_after, created_at
                  limit p_limit - v_claimed
                  for update skip locked) c;
        end if;
        exit when cardinality(v_ids) = 0;
        v_flow := tickq.flow_admit(v_ids, v_now);

        return query
        with claimed as materialized (
            select * from tickq.jobs_lease(v_flow.admitted, p_lease_seconds, v_now, p_seed)
        ), logged as (
            -- One row, always: joined below, it runs once the jobs are claimed.
            select tickq.flow_log(array(select k from claimed c, unnest(c.flow_keys) k), v_now)
        )
        select c.* from claimed c cross join logged;

        get diagnostics v_rows = row_count;
        v_claimed := v_claimed + v_rows;
        -- Every candidate was taken: the queue has no more for us.
        exit when v_rows = cardinality(v_ids);
        v_blocked := v_blocked || v_flow.blocked;
    end loop;
end $$;

-- The flow limits' rules: the claims (which run as the worker) call them; nobody else.
revoke all on function tickq.claim_flow(text[], integer, integer, timestamptz, uuid) from public;
grant execute on function tickq.claim_flow(text[], integer, integer, timestamptz, uuid) to tickq_worker;
