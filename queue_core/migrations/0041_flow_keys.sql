-- Flow keys: a job carries up to 8 keys naming what it touches (a customer, a downstream
-- account), given by its caller or filled from its payload by its task's templates; limits
-- per key prefix (a cap of running jobs and a rate of starts, per key) and holds (a key
-- kept from starting until a time) are enforced inside every claim while any exists. An
-- outside caller's keys are stored under its owner.

alter table tickq.jobs add column flow_keys text[] not null default '{}';
alter table tickq.jobs add constraint jobs_flow_keys_check check (
    cardinality(flow_keys) <= 8
    and (flow_keys = '{}'
         or (array_ndims(flow_keys) = 1 and array_position(flow_keys, null) is null
             and array_to_string(flow_keys, ',') collate "C"
                 ~ '^[A-Za-z0-9_.:/@=+-]{1,240}(,[A-Za-z0-9_.:/@=+-]{1,240})*$')));

-- Flow limits: per key prefix, at most max_running jobs of EACH key it governs running at
-- once across every worker, and at most rate_limit starts of each key in any
-- rate_period_seconds window. A key is governed by its longest limited prefix. Enforced in
-- every claim while any limit or hold exists (tickq.flow_admit); running counts are read
-- from the jobs themselves, so a reclaimed lease frees its key and nothing leaks.
create table tickq.flow_limits (
    prefix              text primary key,
    max_running         integer,
    rate_limit          integer,
    rate_period_seconds double precision,
    updated_at          timestamptz not null default now(),

    constraint flow_limits_prefix_check check (
        prefix collate "C" ~ '^[A-Za-z0-9_.:/@=+-]{1,240}$'),
    constraint flow_limits_max_running_check check (
        max_running is null or max_running between 1 and 100000),
    constraint flow_limits_rate_check check (
        (rate_limit is null) = (rate_period_seconds is null)
        and (rate_limit is null or rate_limit between 1 and 10000)
        and (rate_period_seconds is null
             or (rate_period_seconds > 0 and rate_period_seconds <= 86400))),
    constraint flow_limits_some_check check (max_running is not null or rate_limit is not null)
);

-- A key held (a handler told to back off, or an operator): no job of it starts before
-- `until`, at most a day after the hold was set.
create table tickq.flow_holds (
    key        text primary key,
    until      timestamptz not null,
    set_at     timestamptz not null default now(),

    constraint flow_holds_key_check check (key collate "C" ~ '^[A-Za-z0-9_.:/@=+-]{1,240}$'),
    constraint flow_holds_until_check check (
        until <= set_at + interval '1 day'
        and until between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00')
);

-- The starts of rate-limited keys, one row per job started (appended by the claim, never
-- updated: no row that every claim of a busy key rewrites), pruned past the key's period.
create table tickq.flow_starts (
    key text not null,
    at  timestamptz not null
);

-- The claim counts a key's starts in its window.
create index flow_starts_key_idx on tickq.flow_starts (key, at);

-- Whether any flow limit or live hold exists: without one the claims never read flow keys
-- (limits_configured). Security definer, so a login that may not read the holds (the
-- application's: they name other owners' keys) learns this one bit and nothing more.
create function tickq.flow_active() returns boolean
    language sql stable
    security definer
    set search_path = pg_catalog, pg_temp
    as $$
    select exists (select from tickq.flow_limits)
           or exists (select from tickq.flow_holds h where h.until > now())
$$;

-- The flow limit that governs a key: its longest limited prefix (none: the key is free).
-- The one rule of which prefix governs, read by tickq.flow_blocked, tickq.flow_admit and
-- tickq.flow_log.
create function tickq.flow_limit_of(p_key text)
    returns table (prefix text, max_running integer, rate_limit integer,
                   rate_period_seconds double precision)
    language sql stable
    as $$
    select l.prefix, l.max_running, l.rate_limit, l.rate_period_seconds
    from tickq.flow_limits l
    where starts_with(p_key, l.prefix)
    order by char_length(l.prefix) desc
    limit 1
$$;

-- The flow keys that may start no job at p_now: held, at their cap of running jobs, or at
-- their rate in the window ending at p_now. Read without locks, before a claim picks its
-- candidates, so a busy key at the head of the queue cannot starve the others; the claim
-- decides under the keys' locks (tickq.flow_admit), which this only anticipates.
create function tickq.flow_blocked(p_now timestamptz)
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

-- Which of a claim's candidates (p_ids, locked by the caller as queued or retrying, best
-- first) their flow keys let start at p_now, in that order: a job starts when none of its
-- keys is held and each governed key stays within its cap of running jobs and its rate.
-- Also the keys that may start no more (for the caller's next pass to look past).
--
-- Each governed key is locked for the rest of the transaction (an advisory lock on the
-- key: no row that every claim of a busy key rewrites); a key another claimer holds is
-- skipped, never waited for, so claims locking keys in different passes cannot deadlock.
-- Counts are read after the locks, with the fresh snapshot a volatile function's statement
-- takes, so they see every claim the previous holder committed: running + started never
-- exceeds a cap. The running jobs are counted, not a counter: a reclaimed lease frees its
-- key. Starts are counted from p_now back one period, with no upper bound, and logged at
-- p_now (tickq.flow_log): any window of the period then holds at most the rate.
create function tickq.flow_admit(
    p_ids uuid[], p_now timestamptz, out admitted uuid[], out blocked text[])
    returns record
    language plpgsql volatile
    as $$
declare
    v_keys    text[];
    v_max     integer[];
    v_rate    integer[];
    v_period  double precision[];
    v_used    integer[];
    v_started integer[];
    v_held    text[];
    v_job     record;
    v_ok      boolean;
    v_at      integer;
    v_key     text;
begin
    admitted := '{}';
    -- The governed keys among the candidates', in one global order.
    select coalesce(array_agg(k.key order by k.key), '{}'),
           coalesce(array_agg(g.max_running order by k.key), '{}'),
           coalesce(array_agg(g.rate_limit order by k.key), '{}'),
           coalesce(array_agg(g.rate_period_seconds order by k.key), '{}')
    into v_keys, v_max, v_rate, v_period
    from (select distinct k as key
          from tickq.jobs j, unnest(j.flow_keys) k
          where j.id = any(p_ids) and j.status in ('waiting', 'queued', 'running', 'retrying'))
        k
    cross join lateral tickq.flow_limit_of(k.key) g;
    -- A key another claimer holds starts nothing in this claim.
    for i in 1 .. cardinality(v_keys) loop
        if not pg_try_advisory_xact_lock(hashtextextended('tickq.flow:' || v_keys[i], 0)) then
            v_max[i] := 0;
        end if;
    end loop;
    select coalesce(array_agg(coalesce(r.n, 0) order by k.ord), '{}'),
           coalesce(array_agg(coalesce(s.n, 0) order by k.ord), '{}')
    into v_used, v_started
    from unnest(v_keys, v_period) with ordinality k (key, period, ord)
    left join lateral (select count(*)::integer as n from tickq.jobs j
                       where j.status = 'running' and j.flow_keys @> array[k.key]) r on true
    left join lateral (select count(*)::integer as n from tickq.flow_starts f
                       where k.period is not null and f.key = k.key
                         and f.at > p_now - k.period * interval '1 second') s on true;
    select coalesce(array_agg(h.key), '{}') into v_held
    from tickq.flow_holds h
    where h.until > p_now
      and h.key in (select k from tickq.jobs j, unnest(j.flow_keys) k
                    where j.id = any(p_ids)
                      and j.status in ('waiting', 'queued', 'running', 'retrying'));

    -- Greedy, in the candidates' order: each job takes a slot of each of its keys.
    for v_job in
        select c.id, j.flow_keys
        from unnest(p_ids) with ordinality c (id, ord)
        join tickq.jobs j
            on j.id = c.id and j.status in ('waiting', 'queued', 'running', 'retrying')
        order by c.ord
    loop
        v_ok := not (v_job.flow_keys && v_held);
        if v_ok then
            foreach v_key in array v_job.flow_keys loop
                v_at := array_position(v_keys, v_key);
                continue when v_at is null;
                if v_used[v_at] >= coalesce(v_max[v_at], 2147483647)
                   or v_started[v_at] >= coalesce(v_rate[v_at], 2147483647) then
                    v_ok := false;
                end if;
            end loop;
        end if;
        continue when not v_ok;
        admitted := admitted || v_job.id;
        foreach v_key in array v_job.flow_keys loop
            v_at := array_position(v_keys, v_key);
            continue when v_at is null;
            v_used[v_at] := v_used[v_at] + 1;
            v_started[v_at] := v_started[v_at] + 1;
        end loop;
    end loop;

    blocked := v_held || array(
        select k.key from unnest(v_keys, v_max, v_rate, v_used, v_started) k (key, m, r, u, s)
        where u >= coalesce(m, 2147483647) or s >= coalesce(r, 2147483647));
end $$;

-- Log the starts of the claimed jobs' rate-limited keys at p_at (one row per key and job),
-- and drop the key's starts older than its period (a minute's margin for claims whose
-- clocks are behind). Called by every claim with the keys of the jobs it leased.
create function tickq.flow_log(p_keys text[], p_at timestamptz)
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
create function tickq.claim_flow(
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
-- one of them instead of the id index. While any flow limit or hold exists, each group's
-- pick looks past the jobs of blocked keys and the candidates pass through
-- tickq.flow_admit (as in tickq.claim_flow): fairness applies among the jobs their keys
-- let through. p_seed: the leases' seed (see tickq.jobs_lease), drawn there when null.
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
                          and not (j.flow_keys && v_keys_out)
                        order by j.owner_priority desc, j.run_after, j.created_at
                        limit g.quota
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

-- The bounds an enqueue request is checked against, written once for SQL: every enqueue of
-- the SQL surface (tickq.enqueue, tickq.enqueue_many and through it the HTTP API's) reads
-- them here. The Python checks (queue_core/validation.py) name the same numbers, and
-- tests/security/test_app_write_surface.py holds the two equal.
create or replace function tickq.enqueue_bounds() returns jsonb
    language sql immutable parallel safe
    as $$
    select jsonb_build_object(
        'max_name', 128,                  -- type, queue, group: characters
        'max_key', 255,                   -- idempotency keys, debounce and throttle keys
        'max_payload_bytes', 262144,      -- a payload as JSON text
        'max_json_depth', 64,             -- arrays and objects nested in a JSON value
        'max_attempts', 1000,
        'max_priority', 2147483647,       -- a priority is a 32-bit integer, either sign
        'max_lease_seconds', 43200,
        'max_timeout_seconds', 43200,
        'timeout_lease_margin', 10,       -- a timed job's lease: at least its timeout plus this
        'max_delay_seconds', 31622400,    -- 366 days: delay, run_after ahead, gate seconds
        'max_backoff_base', 86400,
        'min_backoff_factor', 1,
        'max_backoff_factor', 100,
        'max_backoff_max', 604800,
        'max_parents', 100,
        'max_flow_keys', 8,               -- flow keys of one job, its task's included
        'max_flow_key', 200,              -- a flow key as given: characters
        'max_batch', 1000,                -- requests of one tickq.enqueue_many call
        'max_signal_bytes', 65536,        -- all of one job's signal payloads together
        'max_signals', 100,
        'max_detail_type', 128,           -- an outbox event's detail-type: characters
        'max_source', 256,                -- an outbox event's source: characters
        'max_detail_bytes', 200000        -- an outbox event's detail as JSON text
    )
$$;

-- One enqueue request, checked and written: the one body behind every enqueue of the SQL
-- surface, tickq.enqueue (a trigger, an RPC, another language) and tickq.enqueue_many (the
-- application login's only way to add jobs, the HTTP API's included). Not executable by the
-- application role: it takes the owner as an argument (p_owner; null for a trusted caller's
-- ownerless job), and only tickq.enqueue_many, which takes it from the session, may pass an
-- application user's.
--
-- p_job is one request as the HTTP API takes it: type, payload, queue, idempotency_key,
-- priority, max_attempts, delay or run_after, lease_seconds, timeout, backoff {base, factor,
-- max, jitter}, group, debounce {key, seconds[, max_seconds]} or throttle {key, seconds},
-- flow_keys [...]; p_after the jobs it waits for (resolved by the caller). Every value is checked against
-- tickq.enqueue_bounds() before anything is written; a refusal is SQLSTATE 22023
-- (invalid_parameter_value) with the field as the error's column name, a parent that cannot
-- be waited for TQ404 (its id as the detail). The time is the database's. A timeout raises
-- the lease to at least the timeout plus timeout_lease_margin, as the Python enqueue does.
-- The job's flow keys are its task's templates (the catalogue's flow_key_templates, not a
-- request field) filled from the payload's top-level fields, then the request's own, an
-- owner's stored as '<owner>/key' (queue_core/flow.py says the same in Python).
--
-- Returns the job's id, its status and the outcome: created, duplicate (an idempotency key's
-- live or succeeded holder, or a throttle's job), debounced (a debounce's job, which took the
-- payload). p_at numbers the request in its call, for the messages; p_names renames the
-- fields in the errors' column names (tickq.enqueue names its own parameters). With
-- p_defer, a plain request (no key, gate or parents) is checked but not written: its row
-- comes back as `deferred`, for the caller to insert with others in one statement (an
-- insert into the partitioned table costs about 0.1 ms to set up, several times a row's
-- own work).
create or replace function tickq.enqueue_job(
    p_owner uuid,
    p_job jsonb,
    p_after uuid[] default '{}',
    p_at integer default null,
    p_names jsonb default '{}',
    p_defer boolean default false,
    out id uuid,
    out status text,
    out outcome text,
    out deferred tickq.jobs
) returns record
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
declare
    b           constant jsonb := tickq.enqueue_bounds();
    v_where     text := coalesce('job ' || p_at || ': ', '');
    v_field     text;
    v_value     jsonb;
    v_type      text;
    v_queue     text := 'default';
    v_payload   jsonb := '{}';
    v_key       text;
    v_priority  integer := 0;
    v_attempts  integer := 3;
    v_run       timestamptz;
    v_delay     double precision;
    v_lease     integer;
    v_timeout   integer;
    v_base      double precision := 1;
    v_factor    double precision := 2;
    v_max       double precision := 300;
    v_jitter    double precision := 0;
    v_group     text;
    v_kind      text;
    v_gate      jsonb;
    v_gate_key  text;
    v_seconds   double precision;
    v_ceiling   double precision;
    v_gated     record;
    v_id        uuid := tickq.new_job_id();
    v_now       timestamptz := now();
    v_parents   record;
    v_pending   integer := 0;
    v_defaults  jsonb;
    v_flow      text[] := '{}';
    v_text      text;
begin
    if jsonb_typeof(p_job) is distinct from 'object' then
        raise exception 'tickq: %a job request must be a JSON object, got %', v_where,
            coalesce(jsonb_typeof(p_job), 'null')
            using errcode = 'invalid_parameter_value',
                  column = coalesce(p_names ->> ('job'), 'job');
    end if;
    -- Expressions rather than queries where they can be: a query per field would cost a bulk
    -- enqueue several times its inserts.
    if p_job - array['type', 'payload', 'queue', 'idempotency_key', 'priority', 'max_attempts',
                     'delay', 'run_after', 'lease_seconds', 'timeout', 'backoff', 'after',
                     'group', 'debounce', 'throttle', 'flow_keys'] <> '{}' then
        select string_agg(k, ', ' order by k) into v_field
        from jsonb_object_keys(p_job - array['type', 'payload', 'queue', 'idempotency_key',
                                              'priority', 'max_attempts', 'delay', 'run_after',
                                              'lease_seconds', 'timeout', 'backoff', 'after',
                                              'group', 'debounce', 'throttle', 'flow_keys']) k;
        raise exception 'tickq: %unknown fields: %', v_where, v_field
            using errcode = 'invalid_parameter_value',
                  column = split_part(v_field, ', ', 1);
    end if;
    -- The task's settings (tickq.task_catalog) for what the request leaves out, checked
    -- below as the request's own. Once the catalogue knows any type, a type it does not
    -- know is refused (after the names), unless the setting tickq.accept_unknown_types is
    -- on: a deployment that enqueues types no worker publishes.
    select c.defaults into v_defaults from tickq.task_catalog c where c.type = p_job ->> 'type';
    if v_defaults is not null then
        p_job := v_defaults || (select coalesce(jsonb_object_agg(e.key, e.value), '{}')
                                from jsonb_each(p_job) e where jsonb_typeof(e.value) <> 'null');
    end if;
    -- Names: the type, the queue and the group.
    foreach v_field in array array['type', 'queue', 'group'] loop
        v_value := p_job -> v_field;
        continue when v_field <> 'type' and coalesce(jsonb_typeof(v_value), 'null') = 'null';
        if jsonb_typeof(v_value) is distinct from 'string'
           or char_length(v_value #>> '{}') not between 1 and (b ->> 'max_name')::integer
           or (v_value #>> '{}') collate "C" !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]*$' then
            raise exception 'tickq: % must be 1-% characters of letters, digits and _.:/- '
                            'starting with a letter or digit, got %', v_where || v_field,
                b ->> 'max_name', left(coalesce(v_value::text, 'nothing'), 60)
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> (v_field), v_field);
        end if;
    end loop;
    if v_defaults is null and exists (select from tickq.task_catalog)
       and coalesce(current_setting('tickq.accept_unknown_types', true), '') <> 'on' then
        raise exception 'tickq: %type % is not in the task catalogue (known: %)', v_where,
            quote_literal(p_job ->> 'type'),
            (select string_agg(k.type, ', ' order by k.type)
             from (select c.type from tickq.task_catalog c order by c.type limit 30) k)
            using errcode = 'invalid_parameter_value',
                  column = coalesce(p_names ->> ('type'), 'type');
    end if;
    v_type := p_job ->> 'type';
    v_queue := coalesce(p_job ->> 'queue', v_queue);
    v_value := p_job -> 'payload';
    if v_value is not null and jsonb_typeof(v_value) <> 'null' then
        if jsonb_typeof(v_value) <> 'object' then
            raise exception 'tickq: %payload must be a JSON object, got %', v_where,
                jsonb_typeof(v_value)
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('payload'), 'payload');
        end if;
        v_payload := v_value;
    end if;
    if octet_length(v_payload::text) > (b ->> 'max_payload_bytes')::integer then
        raise exception 'tickq: %payload is % bytes, over the limit of %', v_where,
            octet_length(v_payload::text), b ->> 'max_payload_bytes'
            using errcode = 'invalid_parameter_value',
                  column = coalesce(p_names ->> ('payload'), 'payload');
    end if;
    if jsonb_path_exists(
           v_payload, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")') then
        raise exception 'tickq: %payload is nested too deeply (more than % arrays and objects)',
            v_where, b ->> 'max_json_depth'
            using errcode = 'invalid_parameter_value',
                  column = coalesce(p_names ->> ('payload'), 'payload');
    end if;
    v_value := p_job -> 'idempotency_key';
    if v_value is not null and jsonb_typeof(v_value) <> 'null' then
        if jsonb_typeof(v_value) <> 'string'
           or char_length(v_value #>> '{}') not between 1 and (b ->> 'max_key')::integer then
            raise exception 'tickq: %idempotency_key must be 1-% characters long', v_where,
                b ->> 'max_key'
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('idempotency_key'), 'idempotency_key');
        end if;
        v_key := v_value #>> '{}';
    end if;
    -- Flow keys: the task's templates filled from the payload, then the request's own.
    for v_field in select t from jsonb_array_elements_text(
                                 coalesce(v_defaults -> 'flow_key_templates', '[]')) t loop
        v_text := v_field;
        for v_value in select to_jsonb(m[1])
                       from regexp_matches(v_field, '\{([A-Za-z_][A-Za-z0-9_]*)\}', 'g') m loop
            if jsonb_typeof(v_payload -> (v_value #>> '{}')) is distinct from 'string'
               and coalesce((v_payload -> (v_value #>> '{}')) #>> '{}', '') !~ '^-?[0-9]+$' then
                raise exception 'tickq: %template % needs the payload''s top-level field % as a '
                                'string or an integer', v_where, quote_literal(v_field),
                    quote_literal(v_value #>> '{}')
                    using errcode = 'invalid_parameter_value',
                          column = coalesce(p_names ->> ('flow_keys'), 'flow_keys');
            end if;
            v_text := replace(v_text, '{' || (v_value #>> '{}') || '}',
                              (v_payload -> (v_value #>> '{}')) #>> '{}');
        end loop;
        if char_length(v_text) > (b ->> 'max_flow_key')::integer
           or v_text collate "C" !~ '^[A-Za-z0-9_.:/@=+-]+$' then
            raise exception 'tickq: %template % gives the flow key %, not 1-% characters of '
                            'letters, digits and _.:/@=+-', v_where, quote_literal(v_field),
                quote_literal(left(v_text, 60)), b ->> 'max_flow_key'
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('flow_keys'), 'flow_keys');
        end if;
        v_flow := array_append(v_flow, v_text);
    end loop;
    v_value := p_job -> 'flow_keys';
    if v_value is not null and jsonb_typeof(v_value) <> 'null' then
        if jsonb_typeof(v_value) <> 'array'
           or jsonb_array_length(v_value) > (b ->> 'max_flow_keys')::integer
           or exists (select from jsonb_array_elements(v_value) e
                      where jsonb_typeof(e) <> 'string'
                         or char_length(e #>> '{}') > (b ->> 'max_flow_key')::integer
                         or (e #>> '{}') collate "C" !~ '^[A-Za-z0-9_.:/@=+-]+$') then
            raise exception 'tickq: %flow_keys must be a list of at most % keys of 1-% '
                            'characters of letters, digits and _.:/@=+-, got %', v_where,
                b ->> 'max_flow_keys', b ->> 'max_flow_key', left(v_value::text, 60)
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('flow_keys'), 'flow_keys');
        end if;
        -- An owner's keys are its own: no tenant can hold back another's by naming its key.
        v_flow := v_flow || array(
            select case when p_owner is null then e else p_owner::text || '/' || e end
            from jsonb_array_elements_text(v_value) e);
    end if;
    v_flow := array(select k from unnest(v_flow) with ordinality f (k, n)
                    group by k order by min(n));
    if cardinality(v_flow) > (b ->> 'max_flow_keys')::integer then
        raise exception 'tickq: %at most % flow keys per job, its task''s included, got %',
            v_where, b ->> 'max_flow_keys', cardinality(v_flow)
            using errcode = 'invalid_parameter_value',
                  column = coalesce(p_names ->> ('flow_keys'), 'flow_keys');
    end if;
    v_priority := coalesce(tickq.request_number(p_job, 'priority', -(b ->> 'max_priority')::float8,
                                                (b ->> 'max_priority')::float8, true, v_where),
                           v_priority);
    v_attempts := coalesce(tickq.request_number(p_job, 'max_attempts', 1,
                                                (b ->> 'max_attempts')::float8, true, v_where),
                           v_attempts);
    v_lease := tickq.request_number(p_job, 'lease_seconds', 1,
                                    (b ->> 'max_lease_seconds')::float8, true, v_where);
    v_timeout := tickq.request_number(p_job, 'timeout', 1,
                                      (b ->> 'max_timeout_seconds')::float8, true, v_where);
    if v_timeout is not null then
        v_lease := least((b ->> 'max_lease_seconds')::integer,
                         greatest(coalesce(v_lease, 0),
                                  v_timeout + (b ->> 'timeout_lease_margin')::integer));
    end if;
    v_delay := tickq.request_number(p_job, 'delay', 0, (b ->> 'max_delay_seconds')::float8,
                                    false, v_where);
    v_value := p_job -> 'run_after';
    if v_value is not null and jsonb_typeof(v_value) <> 'null' then
        if v_delay is not null then
            raise exception 'tickq: %give either run_after or delay, not both', v_where
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('run_after'), 'run_after');
        end if;
        if jsonb_typeof(v_value) <> 'string'
           or (v_value #>> '{}') !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+(Z|[+-][0-9:]+)$' then
            raise exception 'tickq: %run_after must be an ISO 8601 time with its offset, got %',
                v_where, left(v_value::text, 60)
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('run_after'), 'run_after');
        end if;
        v_run := (v_value #>> '{}')::timestamptz;
        if not tickq.readable_time(v_run)
           or v_run > v_now + (b ->> 'max_delay_seconds')::float8 * interval '1 second' then
            raise exception 'tickq: %run_after may be at most 366 days ahead, a finite time of '
                            'the years 1-9999, got %', v_where, v_value #>> '{}'
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('run_after'), 'run_after');
        end if;
    elsif v_delay is not null then
        v_run := v_now + v_delay * interval '1 second';
    end if;
    v_value := p_job -> 'backoff';
    if v_value is not null and jsonb_typeof(v_value) <> 'null' then
        if jsonb_typeof(v_value) <> 'object'
           or v_value - array['base', 'factor', 'max', 'jitter'] <> '{}' then
            raise exception 'tickq: %backoff must be an object of base, factor, max and jitter',
                v_where
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('backoff'), 'backoff');
        end if;
        v_base := coalesce(tickq.request_number(v_value, 'base', 0,
                                                (b ->> 'max_backoff_base')::float8, false,
                                                v_where || 'backoff.', 'backoff'), v_base);
        v_factor := coalesce(tickq.request_number(v_value, 'factor',
                                                  (b ->> 'min_backoff_factor')::float8,
                                                  (b ->> 'max_backoff_factor')::float8, false,
                                                  v_where || 'backoff.', 'backoff'), v_factor);
        v_max := coalesce(tickq.request_number(v_value, 'max', 0,
                                               (b ->> 'max_backoff_max')::float8, false,
                                               v_where || 'backoff.', 'backoff'), v_max);
        v_jitter := coalesce(tickq.request_number(v_value, 'jitter', 0, 1, false,
                                                  v_where || 'backoff.', 'backoff'), v_jitter);
        if v_base <= 0 or v_max < v_base then
            raise exception 'tickq: %backoff base must be above 0 and max at least base', v_where
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('backoff'), 'backoff');
        end if;
    end if;
    -- Debounce or throttle: one at most, never with a key, a debounce never with its own
    -- run time, neither after parents.
    for v_field in select k from unnest(array['debounce', 'throttle']) k loop
        v_value := p_job -> v_field;
        continue when v_value is null or jsonb_typeof(v_value) = 'null';
        if v_kind is not null then
            raise exception 'tickq: %give either debounce or throttle, not both', v_where
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('throttle'), 'throttle');
        end if;
        v_kind := v_field;
        v_gate := v_value;
    end loop;
    if v_kind is not null then
        if jsonb_typeof(v_gate) <> 'object'
           or not v_gate ?& array['key', 'seconds']
           or exists (select from jsonb_object_keys(v_gate) k
                      where k not in ('key', 'seconds', 'max_seconds')
                         or (k = 'max_seconds' and v_kind = 'throttle')) then
            raise exception 'tickq: % must be an object with key and seconds%',
                v_where || v_kind,
                case when v_kind = 'debounce' then ' (and max_seconds)' else '' end
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> (v_kind), v_kind);
        end if;
        if jsonb_typeof(v_gate -> 'key') <> 'string'
           or char_length(v_gate ->> 'key') not between 1 and (b ->> 'max_key')::integer then
            raise exception 'tickq: %.key must be 1-% characters long', v_where || v_kind,
                b ->> 'max_key'
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> (v_kind || '.key'), v_kind || '.key');
        end if;
        v_gate_key := v_gate ->> 'key';
        v_seconds := tickq.request_number(
            v_gate, 'seconds', 0, (b ->> 'max_delay_seconds')::float8, false,
            v_where || v_kind || '.',
            coalesce(p_names ->> (v_kind || '.seconds'), v_kind || '.seconds'));
        v_ceiling := tickq.request_number(
            v_gate, 'max_seconds', 0, (b ->> 'max_delay_seconds')::float8, false,
            v_where || v_kind || '.',
            coalesce(p_names ->> (v_kind || '.max_seconds'), v_kind || '.max_seconds'));
        if v_seconds <= 0 then
            raise exception 'tickq: %.seconds must be more than 0', v_where || v_kind
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> (v_kind || '.seconds'), v_kind || '.seconds');
        end if;
        if v_ceiling < v_seconds then
            raise exception 'tickq: %.max_seconds must be at least seconds (%), got %',
                v_where || v_kind, v_seconds, v_ceiling
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> (v_kind || '.max_seconds'),
                                        v_kind || '.max_seconds');
        end if;
        if v_key is not null then
            raise exception 'tickq: % cannot be combined with idempotency_key: each decides '
                            'which job requests land on', v_where || v_kind
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> (v_kind), v_kind);
        end if;
        if v_kind = 'debounce' and v_run is not null then
            raise exception 'tickq: %debounce cannot be combined with run_after or delay: the '
                            'debounce sets when its job runs', v_where
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('debounce'), 'debounce');
        end if;
        if cardinality(p_after) > 0 then
            raise exception 'tickq: % cannot be combined with after: a job that waits for '
                            'parents is its own job, never an earlier one of the key',
                v_where || v_kind
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> (v_kind), v_kind);
        end if;
    end if;
    if cardinality(p_after) > (b ->> 'max_parents')::integer then
        raise exception 'tickq: %after names more than % parents', v_where, b ->> 'max_parents'
            using errcode = 'invalid_parameter_value',
                  column = coalesce(p_names ->> ('after'), 'after');
    end if;
    -- The owner's share: its group is "<owner>/<group>" (default: the owner), a run time
    -- in the past is now. Without an owner, the group as given (default '') and the queue's
    -- depth checked here (an owner's insert is admitted by its trigger, jobs_app_admit).
    if p_owner is null then
        v_group := coalesce(p_job ->> 'group', '');
        for v_gated in select a.max_depth from tickq.queue_admit(array[v_queue], array[1]) a loop
            raise exception 'tickq: queue % is full', v_queue
                using errcode = 'TQ429', detail = v_queue, hint = v_gated.max_depth::text;
        end loop;
    else
        v_group := p_owner::text || coalesce('/' || (p_job ->> 'group'), '');
        if char_length(v_group) > (b ->> 'max_name')::integer then
            raise exception 'tickq: %group is % characters with its owner''s prefix, over the '
                            'limit of %', v_where, char_length(v_group), b ->> 'max_name'
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('group'), 'group');
        end if;
        if v_run < v_now then
            v_run := null;
        end if;
    end if;
    if v_kind is not null then
        select g.job_id, g.outcome, g.run_after into v_gated
        from tickq.job_gate(v_kind, v_gate_key, p_owner, v_seconds, v_ceiling, v_payload,
                            null, v_id) g;
        if v_gated.outcome <> 'created' then
            select v_gated.job_id, j.status, v_gated.outcome into id, status, outcome
            from tickq.jobs j where j.id = v_gated.job_id;
            return;
        end if;
        v_run := coalesce(v_gated.run_after, v_run);
    end if;
    -- The parents, locked in id order until this commits, so none finishes unseen: each is
    -- the owner's own (another owner's job is "not found"), neither dead nor cancelled.
    if cardinality(p_after) > 0 then
        select count(*) as found,
               count(*) filter (where j.status in ('dead', 'cancelled')) as failed,
               count(*) filter (where j.status <> 'succeeded') as unfinished,
               min(j.id::text) filter (where j.status in ('dead', 'cancelled')) as failed_id
        into v_parents
        from (select p.id, p.status from tickq.jobs p
              where p.id = any(p_after) and p.user_id is not distinct from p_owner
              order by p.id
              for no key update) j;
        if v_parents.found < cardinality(p_after) then
            select a into v_field from unnest(p_after) a
            where not exists (select from tickq.jobs p
                              where p.id = a and p.user_id is not distinct from p_owner)
            limit 1;
            raise exception 'tickq: %job % not found', v_where, v_field
                using errcode = 'TQ404',
                      column = coalesce(p_names ->> ('after'), 'after'), detail = v_field;
        end if;
        if v_parents.failed > 0 then
            raise exception 'tickq: %job % is %: a job after it could never run', v_where,
                v_parents.failed_id,
                (select p.status from tickq.jobs p where p.id = v_parents.failed_id::uuid)
                using errcode = 'TQ404',
                      column = coalesce(p_names ->> ('after'), 'after'),
                      detail = v_parents.failed_id;
        end if;
        v_pending := v_parents.unfinished;
    end if;
    if p_defer and v_key is null and v_kind is null and cardinality(p_after) = 0 then
        deferred.id := v_id;
        deferred.queue := v_queue;
        deferred.type := v_type;
        deferred.user_id := p_owner;
        deferred.payload := v_payload;
        deferred.max_attempts := v_attempts;
        deferred.priority := v_priority;
        deferred.run_after := coalesce(v_run, v_now);
        deferred.lease_seconds := v_lease;
        deferred.timeout_seconds := v_timeout;
        deferred.backoff_base := v_base;
        deferred.backoff_factor := v_factor;
        deferred.backoff_max := v_max;
        deferred.backoff_jitter := v_jitter;
        deferred.group_key := v_group;
        deferred.flow_keys := v_flow;
        deferred.created_at := v_now;
        deferred.updated_at := v_now;
        id := v_id;
        status := 'queued';
        outcome := 'created';
        return;
    end if;
    -- A key's holder that commits between the key's insert and its lookup, or lets go of
    -- the key meanwhile, makes the enqueue go again, as the Python store does.
    for v_round in 1..10 loop
        if v_key is not null then
            insert into tickq.job_keys (idempotency_key, user_id, job_id)
            values (v_key, p_owner, v_id)
            on conflict do nothing;
            if not found then
                select j.id, j.status, 'duplicate' into id, status, outcome
                from tickq.job_keys k join tickq.jobs j on j.id = k.job_id
                where k.idempotency_key = v_key and k.user_id is not distinct from p_owner;
                if found then
                    return;
                end if;
                continue;
            end if;
        end if;
        insert into tickq.jobs as j (
            id, queue, type, user_id, payload, idempotency_key, max_attempts, priority,
            run_after, lease_seconds, timeout_seconds, backoff_base, backoff_factor,
            backoff_max, backoff_jitter, group_key, status, pending_parents, flow_keys,
            created_at, updated_at)
        values (v_id, v_queue, v_type, p_owner, v_payload, v_key, v_attempts, v_priority,
                coalesce(v_run, v_now), v_lease, v_timeout, v_base, v_factor, v_max,
                v_jitter, v_group, case when v_pending > 0 then 'waiting' else 'queued' end,
                v_pending, v_flow, v_now, v_now)
        returning j.id, j.status, 'created' into id, status, outcome;
        if cardinality(p_after) > 0 then
            insert into tickq.job_dependencies (child_id, parent_id, user_id, counted)
            select v_id, p.id, p_owner, p.status <> 'succeeded'
            from tickq.jobs p
            where p.id = any(p_after);
            update tickq.jobs p set has_children = true
            where p.id = any(p_after) and not p.has_children;
        end if;
        return;
    end loop;
    raise exception 'tickq: enqueue of key % did not settle after 10 rounds of key conflicts',
        v_key
        using errcode = 'serialization_failure';
end $$;

-- Insert checked plain requests (tickq.enqueue_job with p_defer) in one statement: the
-- columns an enqueue sets; the rest take the table's defaults.
create or replace function tickq.enqueue_rows(p_rows tickq.jobs[]) returns void
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    if cardinality(p_rows) > 0 then
        insert into tickq.jobs (
            id, queue, type, user_id, payload, max_attempts, priority, run_after,
            lease_seconds, timeout_seconds, backoff_base, backoff_factor, backoff_max,
            backoff_jitter, group_key, flow_keys, created_at, updated_at)
        select r.id, r.queue, r.type, r.user_id, r.payload, r.max_attempts, r.priority,
               r.run_after, r.lease_seconds, r.timeout_seconds, r.backoff_base,
               r.backoff_factor, r.backoff_max, r.backoff_jitter, r.group_key, r.flow_keys,
               r.created_at, r.updated_at
        from unnest(p_rows) r;
    end if;
end $$;

-- Flow limits and holds are the workers' (a handler holds its key); the starts of
-- rate-limited keys are written by the claim, which runs as the worker. Applications read
-- none of them (a hold names another owner's key): they learn only whether any limit or
-- hold exists (tickq.flow_active), as the store's probe asks.
grant select, insert, update, delete on tickq.flow_limits, tickq.flow_holds,
    tickq.flow_starts to tickq_worker;
-- The first of a job's flow keys that keeps it from starting now (held, at its cap or at
-- its rate: tickq.flow_blocked), for the job views (`tickq show`, the API's GET
-- /jobs/{id}): null for a job its keys let run, or that does not wait to run. Security
-- definer, as an application may not read the holds (they name other owners' keys): so it
-- answers only of the caller's own job, as row-level security would let it read it, or of
-- any job to a worker's login.
create function tickq.flow_job_waits(p_job uuid) returns text
    language sql stable
    security definer
    set search_path = pg_catalog, pg_temp
    as $$
    select f.k
    from tickq.jobs j cross join unnest(j.flow_keys) with ordinality f (k, n)
    where j.id = p_job
      and j.status in ('queued', 'retrying') and j.run_after <= now()
      and (j.user_id = tickq.current_user_id()
           or (tickq.current_user_id() is null
               and pg_has_role(session_user, 'tickq_worker', 'USAGE')))
      and f.k = any(tickq.flow_blocked(now()))
    order by f.n
    limit 1
$$;

revoke all on function tickq.flow_active(), tickq.flow_limit_of(text),
    tickq.flow_blocked(timestamptz), tickq.flow_admit(uuid[], timestamptz),
    tickq.flow_log(text[], timestamptz),
    tickq.claim_flow(text[], integer, integer, timestamptz, uuid) from public;
revoke all on function tickq.flow_job_waits(uuid) from public;
grant execute on function tickq.flow_active(), tickq.flow_job_waits(uuid)
    to tickq_app, tickq_worker;
grant execute on function tickq.flow_limit_of(text), tickq.flow_blocked(timestamptz),
    tickq.flow_admit(uuid[], timestamptz), tickq.flow_log(text[], timestamptz),
    tickq.claim_flow(text[], integer, integer, timestamptz, uuid) to tickq_worker;

-- tickq.enqueue takes flow_keys: a new signature, so the old function goes.
drop function tickq.enqueue(text, jsonb, text, text, integer, timestamptz, integer, text, text,
                            double precision, double precision, text, double precision);
-- Enqueue one job from SQL: from a trigger in the caller's transaction, a PostgREST or
-- Supabase RPC, or any language with a PostgreSQL driver. Returns the job's id; with an
-- idempotency key a live or succeeded job of the same owner holds, the holder's id; with a
-- debounce or throttle (debounce_key, debounce_seconds[, debounce_max_seconds];
-- throttle_key, throttle_seconds) whose key's job took the enqueue, that job's id
-- (tickq.job_gate says which; neither goes with an idempotency key or the other, nor a
-- debounce with run_after). flow_keys: the job's own flow keys (a user's stored under it),
-- besides those its task's templates give.
--
-- The request is checked and written by tickq.enqueue_job, the body of every SQL enqueue:
-- each refusal is SQLSTATE 22023 (invalid_parameter_value) with the parameter as the error's
-- column name, before anything is written. Who the job belongs to is the transaction's user
-- (tickq.current_user_id(), set with set_config('tickq.user_id', ..., true)):
-- * With a user: the enqueue is tickq.enqueue_many's (the only write the application login
--   has), so the job is that user's, on the database's clock, admitted by its insert's
--   trigger (jobs_app_admit); its group is "<user>/<group_key>" (default: the user), a
--   run_after in the past becomes now. A full queue is SQLSTATE TQ429.
-- * Without one: only a trusted role (a worker, tickq_worker, or the tables' owner) may
--   enqueue, and the job has no owner, its group is group_key as given (default ''), and
--   the queue's depth limit is checked (tickq.queue_admit), as the Python store does for a
--   worker's enqueue. An application role without a user is SQLSTATE 42501.
--
-- What the call leaves out (null) comes from the task catalogue (tickq.task_catalog), then
-- from the defaults: queue 'default', priority 0, max_attempts 3.
--
-- Security invoker: a caller without a user enqueues with its own rights.
create function tickq.enqueue(
    type text,
    payload jsonb default '{}',
    queue text default null,
    idempotency_key text default null,
    priority integer default null,
    run_after timestamptz default null,
    max_attempts integer default null,
    group_key text default null,
    debounce_key text default null,
    debounce_seconds double precision default null,
    debounce_max_seconds double precision default null,
    throttle_key text default null,
    throttle_seconds double precision default null,
    flow_keys text[] default null
) returns uuid
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_owner uuid := tickq.current_user_id();
    v_bad   record;
    v_job   jsonb;
    v_id    uuid;
    -- A refusal names this function's parameters, not a request's fields.
    v_names constant jsonb := '{"group": "group_key", "debounce": "debounce_key",
        "debounce.key": "debounce_key", "debounce.seconds": "debounce_seconds",
        "debounce.max_seconds": "debounce_max_seconds", "throttle": "throttle_key",
        "throttle.key": "throttle_key", "throttle.seconds": "throttle_seconds"}';
begin
    if v_owner is null
       and not pg_has_role('tickq_worker', 'USAGE')
       and not pg_has_role((select c.relowner from pg_class c
                            where c.oid = 'tickq.jobs'::regclass), 'USAGE') then
        raise exception 'tickq: an application''s enqueue needs the transaction''s user'
            using errcode = 'insufficient_privilege',
                  hint = 'select set_config(''tickq.user_id'', <user uuid>, true) first';
    end if;
    -- This function's own parameters: group_key (a request's "group"), and the gate's
    -- parts, which a request gives as one object.
    if enqueue.group_key is not null
       and (char_length(enqueue.group_key) not between 1 and 128
            or enqueue.group_key collate "C" !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]*$') then
        raise exception 'tickq: group_key must be 1-128 characters of letters, digits and '
                        '_.:/- starting with a letter or digit, got %',
            quote_literal(left(enqueue.group_key, 60))
            using errcode = 'invalid_parameter_value', column = 'group_key';
    end if;
    if v_owner is not null and char_length(v_owner::text || '/' || enqueue.group_key) > 128 then
        raise exception 'tickq: group_key is % characters with its owner''s prefix, over the '
                        'limit of 128', char_length(v_owner::text || '/' || enqueue.group_key)
            using errcode = 'invalid_parameter_value', column = 'group_key';
    end if;
    if enqueue.debounce_key is null and enqueue.throttle_key is null
       and coalesce(enqueue.debounce_seconds, enqueue.debounce_max_seconds,
                    enqueue.throttle_seconds) is not null then
        raise exception 'tickq: debounce_seconds, debounce_max_seconds and throttle_seconds '
                        'need their debounce_key or throttle_key'
            using errcode = 'invalid_parameter_value', column = 'debounce_key';
    end if;
    if not isfinite(enqueue.run_after) then
        raise exception 'tickq: run_after must be a finite time, got %', enqueue.run_after
            using errcode = 'invalid_parameter_value', column = 'run_after';
    end if;
    v_job := jsonb_build_object(
        'type', enqueue.type, 'payload', enqueue.payload, 'queue', enqueue.queue,
        'idempotency_key', enqueue.idempotency_key, 'priority', enqueue.priority,
        'run_after', enqueue.run_after, 'max_attempts', enqueue.max_attempts,
        'group', enqueue.group_key,
        'debounce', case when enqueue.debounce_key is not null then jsonb_build_object(
            'key', enqueue.debounce_key, 'seconds', enqueue.debounce_seconds,
            'max_seconds', enqueue.debounce_max_seconds) end,
        'throttle', case when enqueue.throttle_key is not null then jsonb_build_object(
            'key', enqueue.throttle_key, 'seconds', enqueue.throttle_seconds) end,
        'flow_keys', to_jsonb(enqueue.flow_keys));
    if v_owner is not null then
        select e.id into v_id from tickq.enqueue_many(jsonb_build_array(v_job), v_names) e;
    else
        select e.id into v_id from tickq.enqueue_job(null, v_job, '{}', null, v_names) e;
    end if;
    return v_id;
end $$;

revoke all on function tickq.enqueue(text, jsonb, text, text, integer, timestamptz, integer,
                                     text, text, double precision, double precision, text,
                                     double precision, text[]) from public;
grant execute on function tickq.enqueue(text, jsonb, text, text, integer, timestamptz,
                                        integer, text, text, double precision,
                                        double precision, text, double precision, text[])
    to tickq_app, tickq_worker;
