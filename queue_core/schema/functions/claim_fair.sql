-- The fair claim of one queue: turns across tenants first, then across each tenant's
-- groups. A job's tenant is its group key up to the first '/' (the whole key without one;
-- the HTTP API's groups are "<caller>/<group>"), so a caller who spreads its jobs over many
-- groups gets no more turns than one who does not. Each pass:
--   1. finds the best priority level with runnable jobs (jobs_claim_idx, one entry);
--   2. sweeps that level's tenants in tenant order from where this worker stopped last time
--      (p_after, a tenant; wrapping around to the first tenant), one tenant per job still
--      wanted, ceil(wanted / tenants) jobs per tenant; within each tenant, sweeps its groups
--      from the group this worker served last in it (p_positions, group keys, one per
--      tenant at most; none: after its bare key, the key without '/', which comes back on
--      the wrap), one group per job the tenant may take, and
--      locks each group's best jobs that no other claimer holds, up to the tenant's share
--      per group (SKIP LOCKED: workers sweeping the same groups at once take the next
--      jobs), so that a group with fewer jobs leaves its part of the share to the tenant's
--      other groups instead of leaving the tenant short: a backlog of any size in any
--      number of groups is one tenant and gets one turn, so it delays another tenant's job
--      by at most one slot per batch of each worker;
--   3. when no limit concerns the candidates, leases the first ones in (rank within tenant,
--      sweep order), the round-robin order, a tenant's rank being (rank within group, group
--      sweep order);
--   4. otherwise holds back jobs of a (type, group) or (queue, group) at its cap and of a type
--      at its cap or rate, deciding after locking the limit rows (as tickq.claim_limited
--      does, whose rules it applies too: this function replaces it whenever fairness is in
--      play), and leases the rest in that order.
-- Within a group, jobs go by owner_priority (the order an application user gave its own
-- jobs), then run_after and created_at.
-- A pass that leases nothing moves down to the next priority level. Running counts are read
-- from tickq.jobs after the locks, with the fresh snapshot a volatile function takes per
-- statement, so running + claimed never exceeds a cap.
-- Jobs are leased by tickq.jobs_lease, the lease rule of every claim, and the type limits
-- read through tickq.type_allowance and tickq.type_limits_log, as tickq.claim_limited does.
-- Its other lookups by id name the live partition's statuses, as tickq.jobs_lease does, so
-- they read tickq.jobs_live alone instead of probing the id index of every day of finished
-- jobs. Every row looked up there is one this claim holds locked as queued or retrying, so
-- the condition changes no result; the whole live list, not ('queued', 'retrying'), which
-- would match the predicate of jobs_claim_idx and jobs_fair_idx and let the planner scan
-- one of them instead of the id index. While any flow limit or hold exists, each group's
-- pick looks past the jobs of blocked keys and the candidates pass through
-- tickq.flow_admit (as in tickq.claim_flow): fairness applies among the jobs their keys
-- let through. p_seed: the leases' seed (see tickq.jobs_lease), drawn there when null.
-- Its order and runnable condition are the plain claim's (queries.sql's pick_runnable and
-- pick_in_claim_order), held to them by tests/unit/test_claim_order_shared.py.
create or replace function tickq.claim_fair(
    p_queue text, p_limit integer, p_lease_seconds integer, p_now timestamptz, p_after text,
    p_positions text[] default '{}', p_seed uuid default null)
    returns setof tickq.jobs
    language plpgsql volatile
    as $$
declare
    v_now       timestamptz := coalesce(p_now, now());
    v_start     timestamptz;
    v_level     integer;
    v_below     integer;
    v_after     text := p_after;
    v_positions text[] := coalesce(p_positions, '{}');
    v_position_tenants text[] := array(
        select split_part(p, '/', 1) from unnest(coalesce(p_positions, '{}')) p);
    v_at        integer;
    v_tenants   text[];
    v_groups    text[];
    v_keys      text[];
    v_tenant_of integer[];
    v_first     text;
    v_want      integer;
    v_share     integer;
    v_ids       uuid[];
    v_types     text[];
    v_capped    text[];
    v_limited   text[];
    v_queue_cap integer;
    v_claimed   integer := 0;
    v_rows      integer;
    v_pass      integer := 0;
    v_flowing   boolean;
    v_keys_out  text[] := '{}';
    v_flow      record;
begin
    -- Flow limits in play: their blocked keys are looked past, and the rest admitted below.
    v_flowing := exists (select from tickq.flow_limits)
                 or exists (select from tickq.flow_holds h where h.until > v_now);
    if v_flowing then
        v_keys_out := tickq.flow_blocked(v_now);
    end if;

    while v_claimed < p_limit and v_pass < 8 loop
        v_pass := v_pass + 1;
        v_want := p_limit - v_claimed;

        select j.priority into v_level
        from tickq.jobs j
        where j.status in ('queued', 'retrying') and j.queue = p_queue and j.run_after <= v_now
          and (v_below is null or j.priority < v_below)
        order by j.priority desc
        limit 1;
        exit when v_level is null;

        if v_after is null then
            -- A worker's first claim starts at the tenant of the level's first job in claim
            -- order (its oldest, but for the order owners give their own jobs).
            select split_part(j.group_key, '/', 1) into v_first
            from tickq.jobs j
            where j.status in ('queued', 'retrying') and j.queue = p_queue
              and j.priority = v_level and j.run_after <= v_now
            order by j.owner_priority desc, j.run_after, j.created_at
            limit 1;
            v_tenants := array_prepend(
                v_first, tickq.fair_tenants(p_queue, v_level, v_now, v_first, v_want - 1));
        else
            v_tenants := tickq.fair_tenants(p_queue, v_level, v_now, v_after, v_want);
        end if;
        if cardinality(v_tenants) < v_want then
            -- Wrap around: on from the level's first tenant.
            select split_part(j.group_key, '/', 1) into v_first
            from tickq.jobs j
            where j.status in ('queued', 'retrying') and j.queue = p_queue
              and j.priority = v_level and j.run_after <= v_now
            order by split_part(j.group_key, '/', 1), j.group_key
            limit 1;
            if v_first is not null and v_first <> all(v_tenants) then
                v_tenants := array_append(v_tenants, v_first) || array(
                    select t from unnest(tickq.fair_tenants(
                        p_queue, v_level, v_now, v_first, v_want - cardinality(v_tenants) - 1)) t
                    where t <> all(v_tenants));
            end if;
        end if;
        if cardinality(v_tenants) = 0 then
            v_below := v_level;
            continue;
        end if;
        v_after := v_tenants[cardinality(v_tenants)];
        v_share := (v_want + cardinality(v_tenants) - 1) / cardinality(v_tenants);

        -- Each tenant's groups from where this worker served it last.
        v_keys := '{}';
        v_tenant_of := '{}';
        for i in 1 .. cardinality(v_tenants) loop
            -- Where the tenant's groups resume: after the group served last, or else after
            -- its bare key (the tenant's first group, which the wrap comes back to).
            v_at := array_position(v_position_tenants, v_tenants[i]);
            v_groups := tickq.fair_tenant_groups(
                p_queue, v_level, v_now, v_tenants[i],
                coalesce(v_positions[v_at], v_tenants[i]), v_share);
            continue when cardinality(v_groups) = 0;
            v_keys := v_keys || v_groups;
            v_tenant_of := v_tenant_of || array_fill(i, array[cardinality(v_groups)]);
            -- The next pass of this claim goes on after the last of these groups.
            if v_at is null then
                v_positions := v_positions || v_groups[cardinality(v_groups)];
                v_position_tenants := v_position_tenants || v_tenants[i];
            else
                v_positions[v_at] := v_groups[cardinality(v_groups)];
            end if;
        end loop;

        -- Each group's best jobs that no other claimer holds, locked here (SKIP LOCKED, a
        -- LIMIT per group): workers sweeping the same groups at once take a group's next
        -- jobs instead of colliding on its first ones.
        select coalesce(array_agg(c.id order by c.tenant_rank, c.tenant), '{}'),
               coalesce(array_agg(c.type order by c.tenant_rank, c.tenant), '{}')
        into v_ids, v_types
        from (select g.tenant, x.id, x.type,
                     row_number() over (partition by g.tenant order by x.rank, g.ord)
                         as tenant_rank
              from unnest(v_keys, v_tenant_of) with ordinality g (group_key, tenant, ord)
              cross join lateral (
                  select y.id, y.type,
                         row_number() over (
                             order by y.owner_priority desc, y.run_after, y.created_at) as rank
                  from (select j.id, j.type, j.owner_priority, j.run_after, j.created_at
                        from tickq.jobs j
                        where j.status in ('queued', 'retrying') and j.queue = p_queue
                          and j.priority = v_level
                          and split_part(j.group_key, '/', 1) = v_tenants[g.tenant]
                          and j.group_key = g.group_key
                          and j.run_after <= v_now
                          and not (j.flow_keys && v_keys_out)
                        order by j.owner_priority desc, j.run_after, j.created_at
                        limit v_share
                        for update skip locked) y) x) c;

        if v_flowing and cardinality(v_ids) > 0 then
            -- The candidates their flow keys let start, in the same order, checked at the
            -- claim's start: no later than any start it logs.
            v_flow := tickq.flow_admit(v_ids, v_now);
            v_keys_out := v_keys_out || v_flow.blocked;
            select coalesce(array_agg(c.id order by c.ord), '{}'),
                   coalesce(array_agg(c.type order by c.ord), '{}')
            into v_ids, v_types
            from unnest(v_ids, v_types) with ordinality c (id, type, ord)
            where c.id = any(v_flow.admitted);
        end if;

        select coalesce(array_agg(l.type), '{}'),
               (select q.max_running_per_group from tickq.queue_group_limits q
                where q.queue = p_queue)
        into v_limited, v_queue_cap
        from tickq.type_limits l where l.type = any(v_types);

        if cardinality(v_limited) = 0 and v_queue_cap is null then
            -- No limit concerns these candidates: lease the first v_want, as the plain claim
            -- does (the rest stay locked, unleased, until this transaction ends).
            return query
            with claimed as materialized (
                select * from tickq.jobs_lease(v_ids[1:v_want], p_lease_seconds, v_now, p_seed)
            ), logged as (
                -- One row, always: joined below, it runs once the jobs are claimed.
                select case when v_flowing then tickq.flow_log(
                    array(select k from claimed c, unnest(c.flow_keys) k), v_now) end
            )
            select c.* from claimed c cross join logged;
            get diagnostics v_rows = row_count;
            v_claimed := v_claimed + v_rows;
            if v_rows = 0 then
                v_below := v_level;
                v_after := p_after;
            end if;
            continue;
        end if;

        -- Limit rows of the capped types among the candidates, locked in type order (no
        -- deadlocks; later passes SKIP LOCKED since they would break that order). Claimers of
        -- a capped type take turns here; claimers of other types never touch these rows.
        if v_pass = 1 then
            select coalesce(array_agg(s.type), '{}') into v_capped
            from (select l.type from tickq.type_limits l where l.type = any(v_types)
                  order by l.type for update) s;
            select l.max_running_per_group into v_queue_cap
            from tickq.queue_group_limits l where l.queue = p_queue for update;
        else
            select coalesce(array_agg(s.type), '{}') into v_capped
            from (select l.type from tickq.type_limits l where l.type = any(v_types)
                  order by l.type for update skip locked) s;
        end if;
        -- Read after the locks are held: the clock of the rate log only moves forward.
        v_start := coalesce(p_now, clock_timestamp());

        return query
        with candidate as (
            select c.id, c.ord, j.type, j.group_key
            from unnest(v_ids) with ordinality c (id, ord)
            join tickq.jobs j on j.id = c.id and j.status in ('waiting', 'queued', 'running', 'retrying')
        ), locked as materialized (
            -- Rows another claimer holds are skipped; rows it has leased meanwhile no longer
            -- match the status condition when re-checked under the lock.
            select j.id
            from tickq.jobs j
            where j.id = any(v_ids) and j.status in ('queued', 'retrying')
            for update skip locked
        ), type_allowance as (
            select * from tickq.type_allowance(v_capped, v_start, p_limit)
        ), ranked as (
            select c.id, c.type, c.group_key, c.ord,
                   row_number() over (partition by c.type order by c.ord) as type_rank,
                   row_number() over (partition by c.type, c.group_key order by c.ord)
                       as type_group_rank,
                   row_number() over (partition by c.group_key order by c.ord) as group_rank
            from candidate c
            where c.id in (select id from locked)
        ), chosen as (
            select r.id, r.ord
            from ranked r left join type_allowance a on a.type = r.type
            -- A limited type whose limit row another claimer holds waits for a later claim.
            where ((a.type is null and r.type <> all(v_limited))
                   or (a.type is not null and r.type_rank <= a.n))
              and (a.per_group is null
                   or r.type_group_rank <= a.per_group - (
                       select count(*) from tickq.jobs g
                       where g.status = 'running' and g.type = r.type
                         and g.group_key = r.group_key))
              and (v_queue_cap is null
                   or r.group_rank <= v_queue_cap - (
                       select count(*) from tickq.jobs g
                       where g.status = 'running' and g.queue = p_queue
                         and g.group_key = r.group_key))
            order by r.ord
            limit v_want
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
        -- Nothing more to take at this level (every group swept gave nothing): go below.
        if v_rows = 0 then
            v_below := v_level;
            v_after := p_after;
        end if;
    end loop;
end $$;
