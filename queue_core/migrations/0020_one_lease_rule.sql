-- Every claim leases its jobs through one function, tickq.jobs_lease: the plain claim of
-- queries.sql, tickq.claim_limited and tickq.claim_fair. The limited and fair claims drew
-- a random lease token per job (gen_random_uuid); they now derive it from one random seed
-- per lease, as the plain claim did, and the status, the attempt count, the lease's end and
-- the start time of a claimed job are written in that function alone. The two claims under
-- type limits also share those limits' rules: what a type may still start
-- (tickq.type_allowance) and its rate log (tickq.type_limits_log).

-- Lease claimed jobs: the one lease rule of every claim (jobs_finish_and_claim and its
-- several-queue form in queries.sql, tickq.claim_limited, tickq.claim_fair), so the status,
-- the attempt count, the token, the lease's end and the start time are written here alone.
-- The caller has locked p_ids as queued or retrying (FOR UPDATE SKIP LOCKED); p_now is the
-- claim's instant, p_lease_seconds the lease of jobs that name none of their own.
--
-- A fresh token per claim: the first 16 bytes of sha256(this call's random seed, job id).
-- As unguessable as a random uuid without the seed, and one random draw per call instead of
-- one per job (a build of PostgreSQL without OpenSSL opens /dev/urandom for each draw: a
-- tenth of a batch of 100).
--
-- The lookup by id names the live partition's statuses, so it reads tickq.jobs_live alone
-- (partition pruning needs a constant) instead of probing the id index of every day of
-- finished jobs; not ('queued', 'retrying'), which matches the predicate of jobs_claim_idx
-- and jobs_fair_idx: after a VACUUM the planner scanned a whole one for 100 ids. Every row
-- looked up is one the caller holds locked as queued or retrying, so it changes no result.
create or replace function tickq.jobs_lease(p_ids uuid[], p_lease_seconds integer, p_now timestamptz)
    returns setof tickq.jobs
    language plpgsql volatile
    as $$
declare
    v_seed uuid := gen_random_uuid();
begin
    return query
    update tickq.jobs j
    set status = 'running',
        attempts = j.attempts + 1,
        lease_token = encode(substr(sha256(uuid_send(v_seed) || uuid_send(j.id)), 1, 16),
                             'hex')::uuid,
        lease_until = p_now + coalesce(j.lease_seconds, p_lease_seconds) * interval '1 second',
        started_at = p_now,
        updated_at = p_now
    where j.id = any(p_ids) and j.status in ('waiting', 'queued', 'running', 'retrying')
    returning j.*;
end $$;

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

-- The fair claim of one queue. Each pass:
--   1. finds the best priority level with runnable jobs (jobs_claim_idx, one entry);
--   2. sweeps that level's groups in group order from where this worker stopped last time
--      (p_after; wrapping around to the first group), one group per job still wanted, and
--      locks each group's oldest jobs that no other claimer holds, ceil(wanted / groups) per
--      group (SKIP LOCKED: workers sweeping the same groups at once take the next jobs): a
--      backlog of any size is one group and gets one turn, so it delays another group's job
--      by at most one slot per batch of each worker;
--   3. when no limit concerns the candidates, leases the first ones in (rank within group,
--      sweep order), the round-robin order;
--   4. otherwise holds back jobs of a (type, group) or (queue, group) at its cap and of a type
--      at its cap or rate, deciding after locking the limit rows (as tickq.claim_limited
--      does, whose rules it applies too: this function replaces it whenever fairness is in
--      play), and leases the rest in that order.
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
    p_queue text, p_limit integer, p_lease_seconds integer, p_now timestamptz, p_after text)
    returns setof tickq.jobs
    language plpgsql volatile
    as $$
declare
    v_now       timestamptz := coalesce(p_now, now());
    v_start     timestamptz;
    v_level     integer;
    v_below     integer;
    v_after     text := p_after;
    v_groups    text[];
    v_first     text;
    v_want      integer;
    v_per_group integer;
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
        order by j.priority desc, j.run_after, j.created_at
        limit 1;
        exit when v_level is null;

        if v_after is null then
            -- A worker's first claim starts at the group of the level's oldest job.
            select j.group_key into v_first
            from tickq.jobs j
            where j.status in ('queued', 'retrying') and j.queue = p_queue
              and j.priority = v_level and j.run_after <= v_now
            order by j.run_after, j.created_at
            limit 1;
            v_groups := array_prepend(
                v_first, tickq.fair_groups(p_queue, v_level, v_now, v_first, v_want - 1));
        else
            v_groups := tickq.fair_groups(p_queue, v_level, v_now, v_after, v_want);
        end if;
        if cardinality(v_groups) < v_want then
            -- Wrap around: on from the level's first group.
            select j.group_key into v_first
            from tickq.jobs j
            where j.status in ('queued', 'retrying') and j.queue = p_queue
              and j.priority = v_level and j.run_after <= v_now
            order by j.group_key, j.run_after
            limit 1;
            if v_first is not null and v_first <> all(v_groups) then
                v_groups := array_append(v_groups, v_first) || array(
                    select g from unnest(tickq.fair_groups(
                        p_queue, v_level, v_now, v_first, v_want - cardinality(v_groups) - 1)) g
                    where g <> all(v_groups));
            end if;
        end if;
        if cardinality(v_groups) = 0 then
            v_below := v_level;
            continue;
        end if;
        v_after := v_groups[cardinality(v_groups)];
        v_per_group := (v_want + cardinality(v_groups) - 1) / cardinality(v_groups);

        -- Each group's oldest jobs that no other claimer holds, locked here (SKIP LOCKED, a
        -- LIMIT per group): workers sweeping the same groups at once take a group's next
        -- jobs instead of colliding on its first ones.
        select coalesce(array_agg(c.id order by c.rank, c.ord), '{}'),
               coalesce(array_agg(c.type order by c.rank, c.ord), '{}')
        into v_ids, v_types
        from (select g.ord, x.id, x.type,
                     row_number() over (partition by g.ord order by x.at) as rank
              from unnest(v_groups) with ordinality g (group_key, ord)
              cross join lateral (
                  select j.id, j.type, (j.run_after, j.created_at) as at
                  from tickq.jobs j
                  where j.status in ('queued', 'retrying') and j.queue = p_queue
                    and j.priority = v_level and j.group_key = g.group_key
                    and j.run_after <= v_now
                  order by j.run_after, j.created_at
                  limit v_per_group
                  for update skip locked) x) c;

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

