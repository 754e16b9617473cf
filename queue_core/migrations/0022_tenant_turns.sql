-- Tenancy in the claim: one tenant cannot crowd out or outrank another.
-- * The fair claim takes turns across tenants first, then across each tenant's groups (a
--   job's tenant is its group key up to the first '/'; the HTTP API's groups are
--   "<caller>/<group>"): tickq.claim_fair sweeps tenants (tickq.fair_tenants) and, within
--   each, its groups from where the worker served it last (tickq.fair_tenant_groups, the
--   new p_positions). tickq.fair_groups, the sweep of groups alone, is dropped.
-- * An application user's priority orders only its own jobs: it is kept in the new column
--   owner_priority and the job's global level is 0 (tickq.jobs_app_own, a BEFORE INSERT
--   trigger of application users' transactions, which also puts the job's group among its
--   owner's). Every claim orders a level by owner_priority before run_after; the claim
--   index takes it in the padding after priority, and the fair index leads with the tenant.
-- * Fan-out is bounded: a statement that finishes parents settles at most 1000 of their
--   children (the setting tickq.settle_budget) and records the rest in the new table
--   tickq.job_settlements in its transaction; later short transactions
--   (tickq.jobs_settle_pending, every tick) settle them. A parent's success decrements only
--   the edges that counted it (the new job_dependencies.counted; every edge before this
--   migration did, as no settlement was pending), and the edges are indexed in child order
--   per parent, where a settlement resumes.
-- The index builds lock the live jobs for writes while they run (the live partition only:
-- finished jobs are not indexed by either).

alter table tickq.jobs add column owner_priority integer not null default 0;

drop index tickq.jobs_claim_idx;
create index jobs_claim_idx on tickq.jobs_live
    (queue, priority desc, owner_priority desc, run_after, created_at)
    where status in ('queued', 'retrying');
drop index tickq.jobs_fair_idx;
create index jobs_fair_idx on tickq.jobs_live
    (queue, priority desc, (split_part(group_key, '/', 1)), group_key, owner_priority desc,
     run_after, created_at)
    where status in ('queued', 'retrying');

drop function tickq.claim_fair(text, integer, integer, timestamptz, text);
drop function tickq.fair_groups(text, integer, timestamptz, text, integer);

-- The tenants of one priority level of a queue that have runnable jobs, in tenant order,
-- after p_after, at most p_count of them. A job's tenant is its group key up to the first
-- '/' (the whole key when it has none): the HTTP API's groups are "<caller>/<group>", so a
-- caller's groups are all one tenant. Each step is one descent of jobs_fair_idx (a loose
-- index scan): the cost grows with the tenants returned, never with their groups or jobs.
create or replace function tickq.fair_tenants(
    p_queue text, p_priority integer, p_now timestamptz, p_after text, p_count integer)
    returns text[]
    language sql stable
    as $$
    with recursive sweep (tenant, n) as (
        (select split_part(j.group_key, '/', 1), 1
         from tickq.jobs j
         where p_count > 0
           and j.status in ('queued', 'retrying') and j.queue = p_queue
           and j.priority = p_priority and split_part(j.group_key, '/', 1) > p_after
           and j.run_after <= p_now
         order by split_part(j.group_key, '/', 1), j.group_key
         limit 1)
        union all
        select (select split_part(j.group_key, '/', 1)
                from tickq.jobs j
                where j.status in ('queued', 'retrying') and j.queue = p_queue
                  and j.priority = p_priority and split_part(j.group_key, '/', 1) > s.tenant
                  and j.run_after <= p_now
                order by split_part(j.group_key, '/', 1), j.group_key
                limit 1),
               s.n + 1
        from sweep s
        where s.tenant is not null and s.n < p_count
    )
    select coalesce(array_agg(tenant order by n), '{}') from sweep where tenant is not null
$$;

-- The groups of one tenant with runnable jobs at one priority level of a queue, in group
-- order, from the first after p_after (null: from the tenant's first group), wrapping
-- around to the tenant's first groups, at most p_count of them: the tenant's own round
-- robin, so its turns go to each of its groups alike. Each step is one descent of
-- jobs_fair_idx: the cost grows with the groups returned, never with the jobs. PL/pgSQL,
-- so the two lookups are planned once per session, not once per call.
create or replace function tickq.fair_tenant_groups(
    p_queue text, p_priority integer, p_now timestamptz, p_tenant text, p_after text,
    p_count integer)
    returns text[]
    language plpgsql stable
    as $$
declare
    v_groups  text[] := '{}';
    v_key     text := p_after;
    v_next    text;
    v_wrapped boolean := p_after is null;
begin
    while cardinality(v_groups) < p_count loop
        -- Two statements, not "v_key is null or ...": a bound the index can use in each.
        if v_key is null then
            select j.group_key into v_next
            from tickq.jobs j
            where j.status in ('queued', 'retrying') and j.queue = p_queue
              and j.priority = p_priority and split_part(j.group_key, '/', 1) = p_tenant
              and j.run_after <= p_now
            order by split_part(j.group_key, '/', 1), j.group_key
            limit 1;
        else
            select j.group_key into v_next
            from tickq.jobs j
            where j.status in ('queued', 'retrying') and j.queue = p_queue
              and j.priority = p_priority and split_part(j.group_key, '/', 1) = p_tenant
              and j.group_key > v_key and j.run_after <= p_now
            order by split_part(j.group_key, '/', 1), j.group_key
            limit 1;
        end if;
        if v_next is null or (v_wrapped and p_after is not null and v_next > p_after) then
            -- Past the tenant's last group: on from its first, once.
            exit when v_wrapped;
            v_wrapped := true;
            v_key := null;
            continue;
        end if;
        v_groups := v_groups || v_next;
        v_key := v_next;
    end loop;
    return v_groups;
end $$;

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
--      locks each group's best jobs that no other claimer holds, ceil(tenant's share /
--      groups) per group (SKIP LOCKED: workers sweeping the same groups at once take the
--      next jobs): a backlog of any size in any number of groups is one tenant and gets one
--      turn, so it delays another tenant's job by at most one slot per batch of each worker;
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
-- one of them instead of the id index.
create or replace function tickq.claim_fair(
    p_queue text, p_limit integer, p_lease_seconds integer, p_now timestamptz, p_after text,
    p_positions text[] default '{}')
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
    v_quotas    integer[];
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
begin
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

        -- Each tenant's groups from where this worker served it last, and each group's
        -- quota: the tenant's share spread over them.
        v_keys := '{}';
        v_tenant_of := '{}';
        v_quotas := '{}';
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
            v_quotas := v_quotas || array_fill(
                (v_share + cardinality(v_groups) - 1) / cardinality(v_groups),
                array[cardinality(v_groups)]);
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
              from unnest(v_keys, v_tenant_of, v_quotas) with ordinality
                  g (group_key, tenant, quota, ord)
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
                        order by j.owner_priority desc, j.run_after, j.created_at
                        limit g.quota
                        for update skip locked) y) x) c;

        select coalesce(array_agg(l.type), '{}'),
               (select q.max_running_per_group from tickq.queue_group_limits q
                where q.queue = p_queue)
        into v_limited, v_queue_cap
        from tickq.type_limits l where l.type = any(v_types);

        if cardinality(v_limited) = 0 and v_queue_cap is null then
            -- No limit concerns these candidates: lease the first v_want, as the plain claim
            -- does (the rest stay locked, unleased, until this transaction ends).
            return query
            select * from tickq.jobs_lease(v_ids[1:v_want], p_lease_seconds, v_now);
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
            select * from tickq.jobs_lease(array(select id from chosen), p_lease_seconds, v_start)
        ), logged as (
            -- One row, always: joined below, it runs once the jobs are claimed.
            select tickq.type_limits_log(array(select type from claimed), v_start)
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
-- tickq.claim_fair applies too).
create or replace function tickq.claim_limited(
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
                  order by priority desc, owner_priority desc, run_after, created_at
                  limit p_limit - v_claimed
                  for update skip locked) c;
        else
            select coalesce(array_agg(c.id), '{}'), coalesce(array_agg(c.type), '{}')
            into v_ids, v_types
            from (select id, type from tickq.jobs
                  where status in ('queued', 'retrying') and queue = any(p_queues)
                    and run_after <= v_now and type <> all(v_blocked)
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

        return query
        with allowance as (
            select * from tickq.type_allowance(v_locked, v_start, p_limit)
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
        ), logged as (
            -- One row, always: joined below, it runs once the jobs are claimed.
            select tickq.type_limits_log(array(select type from claimed), v_start)
        )
        select c.* from claimed c cross join logged;

        get diagnostics v_rows = row_count;
        v_claimed := v_claimed + v_rows;
        -- Every candidate was taken: the queue has no more for us.
        exit when v_rows = cardinality(v_ids);
        -- Some were held back by a limit: look past those types in the next pass.
        v_blocked := v_blocked || v_limited;
    end loop;
end $$;

-- An application user's job (the HTTP API, tickq.enqueue or a plain insert as the
-- application role) competes as its owner's, whatever it asks for:
-- * its priority orders only the owner's own jobs: it is kept as owner_priority and the
--   job's global level is 0, so no caller's job overtakes another tenant's;
-- * its group is one of the owner's: "<owner>" for none, "<owner>/<group>" otherwise (the
--   API's form), so the tenant the fair claim gives turns to is the owner, and no caller
--   can invent tenants or join, or use up the turns of, another's.
-- A BEFORE INSERT trigger (a retry's row moving back into the live partition also fires it,
-- already in this form, and is left as it is).
create or replace function tickq.jobs_app_own() returns trigger
    language plpgsql
    as $$
begin
    if new.priority <> 0 then
        new.owner_priority := new.priority;
        new.priority := 0;
    end if;
    if new.user_id is not null and split_part(new.group_key, '/', 1) <> new.user_id::text then
        if new.group_key = '' then
            new.group_key := new.user_id::text;
        elsif char_length(new.group_key) > 128 - 37 then
            raise exception 'tickq: group_key is % characters with its owner''s prefix, over '
                            'the limit of 128', char_length(new.group_key) + 37
                using errcode = 'TQ422', detail = 'group_key';
        else
            new.group_key := new.user_id::text || '/' || new.group_key;
        end if;
    end if;
    return new;
end $$;

create trigger jobs_app_own before insert on tickq.jobs
    for each row
    when (coalesce(current_setting('tickq.user_id', true), '') <> '')
    execute function tickq.jobs_app_own();

alter table tickq.job_dependencies add column counted boolean not null default true;
alter table tickq.job_dependencies alter column counted set default false;
drop index tickq.job_dependencies_parent_idx;
create index job_dependencies_parent_idx on tickq.job_dependencies (parent_id, child_id);

create table tickq.job_settlements (
    parent_id   uuid primary key,
    status      text not null,
    root_id     uuid not null,
    root_status text not null,
    after_child uuid,
    user_id     uuid,
    created_at  timestamptz not null default now(),
    constraint job_settlements_status_check check (
        status in ('succeeded', 'dead', 'cancelled')
        and root_status in ('succeeded', 'dead', 'cancelled'))
);

grant select, insert, update, delete on tickq.job_settlements to tickq_worker;
grant select, insert, update, delete on tickq.job_settlements to tickq_app;
alter table tickq.job_settlements enable row level security;
alter table tickq.job_settlements force row level security;
create policy job_settlements_owner on tickq.job_settlements to tickq_app
    using (user_id = tickq.current_user_id())
    with check (user_id = tickq.current_user_id());
create policy job_settlements_worker on tickq.job_settlements to tickq_worker
    using (true) with check (true);
do $$
begin
    execute format('create policy job_settlements_table_owner on tickq.job_settlements to %I'
                   ' using (true) with check (true)',
                   (select r.rolname from pg_class c join pg_roles r on r.oid = c.relowner
                    where c.oid = 'tickq.job_settlements'::regclass));
end $$;

-- Work off settlements (tickq.jobs_settle, tickq.jobs_settle_pending), at most p_budget
-- children in all, and record what is left in tickq.job_settlements. Each settlement goes
-- through its parent's children in child order after after_child:
-- * a success decrements each waiting child's pending_parents by its counted edge and
--   releases the child when that reaches 0. Children are locked in id order, so parents of
--   one fan-in finishing on several workers at once queue up on the child in one order (no
--   deadlock), and each decrement applies to the count the previous one left: released
--   exactly once.
-- * a failure cancels each waiting child, naming the failed job the settlement descends
--   from (root_id); a cancelled child with children of its own becomes a settlement of its
--   own, worked off before any of a later root, so a descendant reached from several failed
--   jobs is named after the least of them. Descendants are followed through waiting jobs
--   only: a job past waiting has no unfinished parent.
-- p_work comes successes first, then failures by root; the work left (the rest of one
-- settlement's children, and those not reached) is written back, the finished ones deleted.
create or replace function tickq.jobs_settle_run(
    p_work tickq.job_settlements[], p_budget integer, p_at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
declare
    v_work     tickq.job_settlements[] := p_work;
    v_item     tickq.job_settlements;
    v_children uuid[];
    v_doomed   tickq.job_settlements[];
    v_left     integer := p_budget;
    v_settled  integer := 0;
    v_touched  integer;
    v_done     uuid[] := '{}';
begin
    while cardinality(v_work) > 0 and v_left > 0 loop
        v_item := v_work[1];
        v_work := v_work[2:];
        if v_item.after_child is null then
            select coalesce(array_agg(d.child_id order by d.child_id), '{}') into v_children
            from (select d.child_id from tickq.job_dependencies d
                  where d.parent_id = v_item.parent_id
                  order by d.child_id limit v_left + 1) d;
        else
            select coalesce(array_agg(d.child_id order by d.child_id), '{}') into v_children
            from (select d.child_id from tickq.job_dependencies d
                  where d.parent_id = v_item.parent_id and d.child_id > v_item.after_child
                  order by d.child_id limit v_left + 1) d;
        end if;
        if cardinality(v_children) > v_left then
            -- More than the budget allows: settle a slice, leave the rest for later.
            v_children := v_children[1:v_left];
            v_work := array_prepend(
                row(v_item.parent_id, v_item.status, v_item.root_id, v_item.root_status,
                    v_children[v_left], v_item.user_id, v_item.created_at)::tickq.job_settlements,
                v_work);
        else
            v_done := v_done || v_item.parent_id;
        end if;
        v_left := v_left - cardinality(v_children);

        perform from tickq.jobs c
        where c.id = any(v_children) and c.status = 'waiting'
        order by c.id
        for no key update;

        if v_item.status = 'succeeded' then
            update tickq.jobs c
            set pending_parents = c.pending_parents - 1,
                status = case when c.pending_parents = 1 then 'queued' else 'waiting' end,
                updated_at = p_at
            from tickq.job_dependencies d
            where d.parent_id = v_item.parent_id and d.child_id = c.id and d.counted
              and c.id = any(v_children) and c.status = 'waiting';
            get diagnostics v_touched = row_count;
        else
            with cancelled as (
                update tickq.jobs c
                set status = 'cancelled',
                    error = 'parent ' || v_item.root_id || ' is ' || v_item.root_status,
                    updated_at = p_at,
                    finished_at = p_at
                where c.id = any(v_children) and c.status = 'waiting'
                returning c.id, c.has_children, c.user_id
            )
            select coalesce(array_agg(
                       row(c.id, 'cancelled', v_item.root_id, v_item.root_status, null,
                           c.user_id, p_at)::tickq.job_settlements order by c.id)
                       filter (where c.has_children), '{}'),
                   count(*)
            into v_doomed, v_touched
            from cancelled c;
            -- The cancelled children's descendants next: every settlement left is a failure
            -- of this root or a later one (successes come first), so the list stays ordered.
            v_work := v_doomed || v_work;
        end if;
        v_settled := v_settled + v_touched;
    end loop;

    delete from tickq.job_settlements s where s.parent_id = any(v_done);
    insert into tickq.job_settlements as s
        (parent_id, status, root_id, root_status, after_child, user_id, created_at)
    select w.parent_id, w.status, w.root_id, w.root_status, w.after_child,
           -- A finished parent's owner (the statement that finished it passed none).
           coalesce(w.user_id, (select j.user_id from tickq.jobs j where j.id = w.parent_id)),
           w.created_at
    from unnest(v_work) w
    on conflict (parent_id) do update
        set status = excluded.status, root_id = excluded.root_id,
            root_status = excluded.root_status, after_child = excluded.after_child;
    return v_settled;
end $$;

-- Settle the children of jobs that just finished: release those whose last parent
-- succeeded, cancel every waiting descendant of a dead or cancelled one. Called by each
-- statement that finishes jobs (jobs_finish_and_claim, jobs_reclaim, jobs_cancel), in its
-- transaction, only for finished jobs with has_children.
--
-- Bounded: this statement settles at most tickq.settle_budget children (a setting; 1000
-- when unset) through tickq.jobs_settle_run, which records what is left in
-- tickq.job_settlements in this same transaction, for later short transactions
-- (tickq.jobs_settle_pending) to finish. So a parent of 100,000 children costs the batch
-- that finishes it about as much as one of 1,000, and no child is forgotten.
--
-- VOLATILE on purpose: each statement below takes a fresh snapshot. A child enqueued while
-- its parent was finishing locked the parent first (jobs_parents_lock), so the finishing
-- statement waited for that enqueue to commit; its own snapshot predates the child, but
-- these statements see it. Either the enqueue saw the parent finished and did not count it
-- (its edge is not counted), or it counted it and is released here or by the settlement
-- left behind: never both, never neither.
create or replace function tickq.jobs_settle(parents uuid[], statuses text[], at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
begin
    -- Successes first, then failures by id: a descendant reached from several failed jobs
    -- at once is cancelled naming the least of them.
    return tickq.jobs_settle_run(
        array(select row(p.id, p.status, p.id, p.status, null::uuid, null::uuid,
                         at)::tickq.job_settlements
              from unnest(parents, statuses) as p (id, status)
              where p.status in ('succeeded', 'dead', 'cancelled')
              order by p.status <> 'succeeded', p.id),
        coalesce(nullif(current_setting('tickq.settle_budget', true), '')::integer, 1000),
        at);
end $$;

-- Work off settlements left by the statements that finished their parents
-- (tickq.jobs_settle): at most p_budget children, in one short transaction, from the
-- settlements no other worker holds (SKIP LOCKED), successes first, then by root, as
-- tickq.jobs_settle_run takes them. Returns the children settled; 0 when none is left.
create or replace function tickq.jobs_settle_pending(p_budget integer, p_at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
begin
    return tickq.jobs_settle_run(
        array(select s from tickq.job_settlements s
              order by s.status <> 'succeeded', s.root_id, s.parent_id
              limit 100
              for update skip locked),
        p_budget, coalesce(p_at, now()));
end $$;

-- Emptying the jobs (tests, benchmarks, a reset) empties what hung on them, as TRUNCATE ...
-- CASCADE would through foreign keys. A delete, not a truncate: a TRUNCATE that names
-- these tables too is still using them here.
create or replace function tickq.jobs_forget_all() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_steps;
    delete from tickq.job_signals;
    delete from tickq.job_dependencies;
    delete from tickq.job_settlements;
    return null;
end $$;
