-- Per-type limits, enforced inside the claim: at most max_running jobs of the type running
-- across all workers, and at most rate_limit starts in any rate_period_seconds window.
create table tickq.type_limits (
    type                text primary key,
    max_running         integer,
    rate_limit          integer,
    rate_period_seconds double precision,
    -- A sliding log of recent starts, one entry per claim (time, jobs started), trimmed to
    -- the last period: at most rate_limit entries, so the row stays small.
    recent_at           timestamptz[] not null default '{}',
    recent_n            integer[] not null default '{}',
    updated_at          timestamptz not null default now(),

    constraint type_limits_max_running_check check (max_running is null or max_running >= 1),
    constraint type_limits_rate_check check (
        (rate_limit is null) = (rate_period_seconds is null)
        and (rate_limit is null or rate_limit >= 1)
        and (rate_period_seconds is null or rate_period_seconds > 0)),
    constraint type_limits_some_check check (
        max_running is not null or rate_limit is not null)
);

-- Per-queue backpressure: enqueue is refused once max_depth jobs wait in the queue.
create table tickq.queue_limits (
    queue      text primary key,
    max_depth  integer not null,
    updated_at timestamptz not null default now(),

    constraint queue_limits_max_depth_check check (max_depth >= 1)
);

grant select, insert, update, delete on tickq.type_limits, tickq.queue_limits to tickq_worker;
-- Every enqueuer (applications included) checks whether limits exist; they are not secret.
grant select on tickq.type_limits, tickq.queue_limits to tickq_app;

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
        ), claimed as (
            update tickq.jobs j
            set status = 'running',
                attempts = j.attempts + 1,
                lease_token = gen_random_uuid(),
                lease_until = v_start
                              + coalesce(j.lease_seconds, p_lease_seconds) * interval '1 second',
                started_at = v_start,
                updated_at = v_start
            where j.id = any(array(select id from chosen))
            returning j.*
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

-- Backpressure for enqueue: lock the limit rows of the given queues (so concurrent enqueuers
-- of one limited queue take turns), then return those that the incoming jobs would overflow.
-- Security definer: depth counts every waiting job, including rows that row-level security
-- hides from the enqueuing application user.
create function tickq.queue_admit(p_queues text[], p_counts integer[])
    returns table (queue text, depth bigint, max_depth integer)
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_limits record;
begin
    for v_limits in
        select l.queue, l.max_depth
        from tickq.queue_limits l
        where l.queue = any(p_queues)
        order by l.queue
        for update
    loop
        queue := v_limits.queue;
        max_depth := v_limits.max_depth;
        -- Counted after the lock: a fresh snapshot that includes the previous holder's jobs.
        -- Bounded by max_depth + 1 rows of jobs_claim_idx, however deep the queue is.
        select count(*) into depth
        from (select 1 from tickq.jobs j
              where j.queue = v_limits.queue and j.status in ('queued', 'retrying')
              limit v_limits.max_depth + 1) w;
        if depth + (select sum(c.n) from unnest(p_queues, p_counts) c (q, n)
                    where c.q = v_limits.queue) > v_limits.max_depth then
            return next;
        end if;
    end loop;
end $$;

revoke all on function tickq.queue_admit(text[], integer[]) from public;
grant execute on function tickq.queue_admit(text[], integer[]) to tickq_app, tickq_worker;
