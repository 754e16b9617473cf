-- The baseline as of its making, frozen: a schema-only dump of a database built by tickq's
-- unreleased migrations 0001_jobs ... 0016b_job_keys_by_key, taken when they were folded
-- into the current-state files of queue_core/schema (the baseline, 0017_baseline).
--
-- tests/integration/test_schema_migrations.py loads it and applies every later migration,
-- then compares that database's catalog with one built from the current-state files: the
-- proof that the migrations and the current-state files say the same, and, since this
-- file came from the old migrations, that a database at 0016b is at the baseline.
--
-- Never edit it to follow a schema change: a change is a migration (queue_core/migrations/)
-- plus the updated current-state file. Made by
--     pg_dump --schema-only --no-owner (PostgreSQL 15.18)
-- of a new database that `tickq migrate` brought to 0016b_job_keys_by_key, with only these
-- edits: the run-time day partitions of finished jobs (tickq.jobs_done_YYYYMMDD) left out;
-- pg_dump's session settings made local to the loading transaction (SET LOCAL) and its
-- \restrict lines dropped; the owner's policies granted TO CURRENT_USER instead of the name
-- of the login that made it; the roles and the migrating login's membership, which a dump
-- of one database does not hold, made first as those migrations made them; and the
-- versions the database recorded, inserted last.

do $$
begin
    if not exists (select from pg_roles where rolname = 'tickq_app') then
        create role tickq_app nologin;
    end if;
exception when duplicate_object or unique_violation then
    null;  -- another database on this cluster created it at the same moment
end $$;

do $$
begin
    if not exists (select from pg_roles where rolname = 'tickq_worker') then
        create role tickq_worker nologin;
    end if;
exception when duplicate_object or unique_violation then
    null;  -- another database on this cluster created it at the same moment
end $$;

do $$
begin
    if not exists (select from pg_roles where rolname = 'tickq_operator') then
        create role tickq_operator nologin;
    end if;
exception when duplicate_object or unique_violation then
    null;  -- another database on this cluster created it at the same moment
end $$;

do $$
begin
    if not pg_has_role(current_user, 'tickq_app', 'MEMBER') then
        execute format('grant tickq_app to %I', current_user);
    end if;
exception when insufficient_privilege or invalid_grant_operation then
    raise notice 'tickq: % may not act as tickq_app', current_user;
end $$;

--
-- PostgreSQL database dump
--


-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET LOCAL statement_timeout = 0;
SET LOCAL lock_timeout = 0;
SET LOCAL idle_in_transaction_session_timeout = 0;
SET LOCAL client_encoding = 'UTF8';
SET LOCAL standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', true);
SET LOCAL check_function_bodies = false;
SET LOCAL xmloption = content;
SET LOCAL client_min_messages = warning;
SET LOCAL row_security = off;

--
-- Name: tickq; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA tickq;


--
-- Name: act_as_app(); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.act_as_app() RETURNS boolean
    LANGUAGE plpgsql
    AS $$
begin
    perform pg_catalog.set_config('role', 'tickq_app', true);
    return true;
exception when insufficient_privilege then
    return false;
end $$;


--
-- Name: backoff_seconds(integer, double precision, double precision, double precision, double precision); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.backoff_seconds(attempt integer, base double precision, factor double precision, max_delay double precision, jitter double precision) RETURNS double precision
    LANGUAGE sql PARALLEL SAFE
    AS $$
    select case when greatest(attempt - 1, 0) > 64 then max_delay
                else least(base * power(factor, greatest(attempt - 1, 0)), max_delay) end
           * (1 - jitter * random())
$$;


SET LOCAL default_tablespace = '';

--
-- Name: jobs; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.jobs (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL,
    type text NOT NULL,
    user_id uuid,
    status text DEFAULT 'queued'::text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    idempotency_key text,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 3 NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    run_after timestamp with time zone DEFAULT now() NOT NULL,
    lease_until timestamp with time zone,
    lease_token uuid,
    progress jsonb,
    result jsonb,
    error text,
    errors jsonb DEFAULT '[]'::jsonb NOT NULL,
    lease_seconds integer,
    backoff_base double precision DEFAULT 1 NOT NULL,
    backoff_factor double precision DEFAULT 2 NOT NULL,
    backoff_max double precision DEFAULT 300 NOT NULL,
    backoff_jitter double precision DEFAULT 0 NOT NULL,
    cancel_requested boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    resumes integer,
    wait_kind text,
    wait_name text,
    wait_until timestamp with time zone,
    signals text[],
    pending_parents integer DEFAULT 0 NOT NULL,
    has_children boolean DEFAULT false NOT NULL,
    group_key text DEFAULT ''::text NOT NULL COLLATE pg_catalog."C",
    CONSTRAINT jobs_attempts_check CHECK (((attempts >= 0) AND (attempts <= max_attempts))),
    CONSTRAINT jobs_backoff_check CHECK (((backoff_base > (0)::double precision) AND (backoff_factor >= (1)::double precision) AND (backoff_max >= backoff_base) AND ((backoff_jitter >= (0)::double precision) AND (backoff_jitter <= (1)::double precision)))),
    CONSTRAINT jobs_group_key_check CHECK ((char_length(group_key) <= 128)),
    CONSTRAINT jobs_lease_check CHECK (((status = 'running'::text) = ((lease_token IS NOT NULL) AND (lease_until IS NOT NULL)))),
    CONSTRAINT jobs_lease_seconds_check CHECK (((lease_seconds IS NULL) OR (lease_seconds > 0))),
    CONSTRAINT jobs_max_attempts_check CHECK ((max_attempts >= 1)),
    CONSTRAINT jobs_payload_object CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT jobs_pending_parents_check CHECK ((pending_parents >= 0)),
    CONSTRAINT jobs_status_check CHECK ((status = ANY (ARRAY['waiting'::text, 'queued'::text, 'running'::text, 'retrying'::text, 'succeeded'::text, 'dead'::text, 'cancelled'::text]))),
    CONSTRAINT jobs_wait_kind_check CHECK ((wait_kind = ANY (ARRAY['suspend'::text, 'sleep'::text, 'signal'::text])))
)
PARTITION BY LIST (status);

ALTER TABLE ONLY tickq.jobs FORCE ROW LEVEL SECURITY;


--
-- Name: claim_fair(text, integer, integer, timestamp with time zone, text); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.claim_fair(p_queue text, p_limit integer, p_lease_seconds integer, p_now timestamp with time zone, p_after text) RETURNS SETOF tickq.jobs
    LANGUAGE plpgsql
    AS $$
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
            update tickq.jobs j
            set status = 'running',
                attempts = j.attempts + 1,
                lease_token = gen_random_uuid(),
                lease_until = v_now
                              + coalesce(j.lease_seconds, p_lease_seconds) * interval '1 second',
                started_at = v_now,
                updated_at = v_now
            where j.id = any(v_ids[1:v_want]) and j.status in ('waiting', 'queued', 'running', 'retrying')
            returning j.*;
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
            select l.type,
                   least(
                       coalesce(l.max_running - (select count(*) from tickq.jobs r
                                                 where r.status = 'running'
                                                   and r.type = l.type), p_limit),
                       coalesce(l.rate_limit - (select coalesce(sum(e.n), 0)
                                                from unnest(l.recent_at, l.recent_n) e (at, n)
                                                where e.at > v_start - l.rate_period_seconds
                                                             * interval '1 second'), p_limit)
                   ) as n,
                   l.max_running_per_group as per_group
            from tickq.type_limits l
            where l.type = any(v_capped)
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
        ), claimed as (
            update tickq.jobs j
            set status = 'running',
                attempts = j.attempts + 1,
                lease_token = gen_random_uuid(),
                lease_until = v_start
                              + coalesce(j.lease_seconds, p_lease_seconds) * interval '1 second',
                started_at = v_start,
                updated_at = v_start
            where j.id = any(array(select id from chosen)) and j.status in ('waiting', 'queued', 'running', 'retrying')
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
        -- Nothing more to take at this level (every group swept gave nothing): go below.
        if v_rows = 0 then
            v_below := v_level;
            v_after := p_after;
        end if;
    end loop;
end $$;


--
-- Name: claim_limited(text[], integer, integer, timestamp with time zone); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.claim_limited(p_queues text[], p_limit integer, p_lease_seconds integer, p_now timestamp with time zone) RETURNS SETOF tickq.jobs
    LANGUAGE plpgsql
    AS $$
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
            where j.id = any(array(select id from chosen)) and j.status in ('waiting', 'queued', 'running', 'retrying')
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


--
-- Name: current_user_id(); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.current_user_id() RETURNS uuid
    LANGUAGE sql STABLE
    AS $$ select nullif(current_setting('tickq.user_id', true), '')::uuid $$;


--
-- Name: depth_history(timestamp with time zone, text); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.depth_history(p_since timestamp with time zone, p_queue text) RETURNS TABLE(sampled_at timestamp with time zone, queue text, depth bigint, running bigint, oldest_runnable_seconds double precision)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
select s.sampled_at, s.queue, s.depth, s.running, s.oldest_runnable_seconds
from tickq.queue_depth_samples s
where s.sampled_at >= p_since and (p_queue is null or s.queue = p_queue)
order by s.sampled_at, s.queue
$$;


--
-- Name: error_history(jsonb, jsonb); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.error_history(history jsonb, entry jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    select case
        when jsonb_array_length(history) < 20 then history || jsonb_build_array(entry)
        else (select jsonb_agg(e order by i)
              from jsonb_array_elements(history || jsonb_build_array(entry))
                   with ordinality as a (e, i)
              where i > jsonb_array_length(history) + 1 - 20)
    end
$$;


--
-- Name: fair_groups(text, integer, timestamp with time zone, text, integer); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.fair_groups(p_queue text, p_priority integer, p_now timestamp with time zone, p_after text, p_count integer) RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
    with recursive sweep (group_key, n) as (
        (select j.group_key, 1
         from tickq.jobs j
         where p_count > 0
           and j.status in ('queued', 'retrying') and j.queue = p_queue
           and j.priority = p_priority and j.group_key > p_after and j.run_after <= p_now
         order by j.group_key, j.run_after
         limit 1)
        union all
        select (select j.group_key
                from tickq.jobs j
                where j.status in ('queued', 'retrying') and j.queue = p_queue
                  and j.priority = p_priority and j.group_key > s.group_key
                  and j.run_after <= p_now
                order by j.group_key, j.run_after
                limit 1),
               s.n + 1
        from sweep s
        where s.group_key is not null and s.n < p_count
    )
    select coalesce(array_agg(group_key order by n), '{}') from sweep where group_key is not null
$$;


--
-- Name: job_keys_free(); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.job_keys_free() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
    delete from tickq.job_keys k
    where k.idempotency_key = old.idempotency_key
      and k.user_id is not distinct from old.user_id
      and k.job_id = old.id;
    return new;
end $$;


--
-- Name: job_keys_take(); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.job_keys_take() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
    insert into tickq.job_keys (idempotency_key, user_id, job_id)
    values (new.idempotency_key, new.user_id, new.id)
    on conflict do nothing;
    if not found then
        raise exception 'tickq: idempotency key % is held by another live job',
            new.idempotency_key
            using errcode = 'unique_violation', detail = new.id::text;
    end if;
    return new;
end $$;


--
-- Name: job_keys_truncate(); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.job_keys_truncate() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
    delete from tickq.job_keys;
    return null;
end $$;


--
-- Name: jobs_app_admit(); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.jobs_app_admit() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
    v_max   integer;
    v_depth bigint;
begin
    select l.max_depth into v_max
    from tickq.queue_limits l where l.queue = new.queue
    for update;
    if v_max is not null then
        select count(*) into v_depth
        from (select 1 from tickq.jobs j
              where j.queue = new.queue and j.status in ('queued', 'retrying')
              limit v_max + 1) w;
        if v_depth > v_max then
            raise exception 'tickq: queue % is full', new.queue
                using errcode = 'TQ429', detail = new.queue, hint = v_max::text;
        end if;
    end if;
    return null;
end $$;


--
-- Name: jobs_app_guard(); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.jobs_app_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    -- Migration 0008's exemptions, word for word, but only when true. The trigger condition
    -- they came from also let an update through when they were null: on a job waiting for
    -- no signal (wait_kind null), naming any signal and moving run_after earlier made an
    -- application's job run early. Every update the API makes is true here, never null.
    if (new.status = old.status and new.attempts = old.attempts
        and new.cancel_requested = old.cancel_requested
        and new.finished_at is not distinct from old.finished_at
        and new.error is not distinct from old.error
        and (
            (new.signals is distinct from old.signals
             and (new.run_after = old.run_after
                  or (new.run_after < old.run_after and old.wait_kind = 'signal'
                      and old.wait_name = any(new.signals))))
            or (new.status in ('dead', 'cancelled') and new.run_after = old.run_after
                and new.resumes is null and new.wait_kind is null
                and new.wait_name is null and new.wait_until is null
                and new.signals is null))) is true then
        return new;
    end if;
    -- Migration 0009's guard, unchanged.
    if new.status = 'cancelled' and old.status in ('queued', 'retrying', 'waiting')
       and new.attempts = old.attempts then
        return new;
    elsif new.status = 'running' and old.status = 'running' and new.cancel_requested
       and new.attempts = old.attempts and new.run_after = old.run_after then
        return new;
    elsif new.status = 'queued' and old.status in ('dead', 'cancelled') and new.attempts = 0
       and not new.cancel_requested then
        return new;
    elsif new.status = old.status and new.has_children and not old.has_children
       and new.attempts = old.attempts and new.run_after = old.run_after
       and new.finished_at is not distinct from old.finished_at
       and new.cancel_requested = old.cancel_requested
       and new.error is not distinct from old.error then
        return new;
    end if;
    raise exception 'tickq: applications may only cancel or retry jobs (% -> %)',
        old.status, new.status
        using errcode = 'insufficient_privilege';
end $$;


--
-- Name: jobs_day_partitions(); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.jobs_day_partitions() RETURNS TABLE(name text, day date, upper_bound timestamp with time zone)
    LANGUAGE sql STABLE
    AS $_$
select c.relname::text,
       to_date(substr(c.relname, 11), 'YYYYMMDD'),
       (to_date(substr(c.relname, 11), 'YYYYMMDD') + 1)::timestamp at time zone 'UTC'
from pg_inherits i
join pg_class c on c.oid = i.inhrelid
where i.inhparent = 'tickq.jobs_done'::regclass and c.relname ~ '^jobs_done_[0-9]{8}$'
order by c.relname
$_$;


--
-- Name: jobs_forget(); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.jobs_forget() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
    delete from tickq.job_keys k using gone g
    where k.idempotency_key = g.idempotency_key
      and k.user_id is not distinct from g.user_id
      and k.job_id = g.id;
    delete from tickq.job_steps s using gone g where s.job_id = g.id;
    delete from tickq.job_signals s using gone g where s.job_id = g.id;
    delete from tickq.job_dependencies d using gone g where d.child_id = g.id;
    delete from tickq.job_dependencies d using gone g where d.parent_id = g.id;
    return null;
end $$;


--
-- Name: jobs_forget_all(); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.jobs_forget_all() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
begin
    delete from tickq.job_steps;
    delete from tickq.job_signals;
    delete from tickq.job_dependencies;
    return null;
end $$;


--
-- Name: jobs_live_id_statistics(); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.jobs_live_id_statistics() RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
-- Whether it had to write the rows (true) or found them (false).
declare
    v_placeholders uuid[] := array[gen_random_uuid(), gen_random_uuid()];
begin
    if exists (
        select from pg_stats
        where schemaname = 'tickq' and tablename = 'jobs_live' and attname = 'id'
          and not inherited
    ) then
        return false;
    end if;
    insert into tickq.jobs_live (id, type)
    select p, 'tickq.statistics' from unnest(v_placeholders) p;
    analyze tickq.jobs_live (id, status);
    delete from tickq.jobs_live where id = any(v_placeholders);
    return true;
end $$;


--
-- Name: jobs_partition_drop(text); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.jobs_partition_drop(p_name text) RETURNS TABLE(queue text, type text, status text, n bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '200ms'
    AS $_$
declare
    v_try    integer := 0;
    v_needed boolean;
begin
    if p_name !~ '^jobs_done_[0-9]{8}$' or to_regclass('tickq.' || p_name) is null then
        raise exception 'tickq: no day partition named %', p_name
            using errcode = 'invalid_parameter_value';
    end if;
    loop
        begin
            -- Nothing reads or writes the partition from here on: a child enqueued after a
            -- parent in it was checked would otherwise lose the parent's result.
            execute format('lock table tickq.%I in access exclusive mode', p_name);
            execute format(
                'select exists (select from tickq.%I j join tickq.job_dependencies d'
                ' on d.parent_id = j.id join tickq.jobs_live c on c.id = d.child_id'
                ' where j.has_children)', p_name) into strict v_needed;
            if v_needed then
                return;
            end if;
            -- One row per queue, type and status; one row of nulls for an empty partition.
            return query execute format(
                'select j.queue, j.type, j.status, count(*) from tickq.%I j'
                ' group by j.queue, j.type, j.status'
                ' union all select null, null, null, 0'
                ' where not exists (select from tickq.%I)', p_name, p_name);
            execute format('delete from tickq.job_keys k using tickq.%I j'
                           ' where k.idempotency_key = j.idempotency_key'
                           ' and k.user_id is not distinct from j.user_id'
                           ' and k.job_id = j.id', p_name);
            execute format('delete from tickq.job_steps s using tickq.%I j'
                           ' where s.job_id = j.id', p_name);
            execute format('delete from tickq.job_signals s using tickq.%I j'
                           ' where s.job_id = j.id', p_name);
            execute format('delete from tickq.job_dependencies d using tickq.%I j'
                           ' where d.child_id = j.id or d.parent_id = j.id', p_name);
            execute format('drop table tickq.%I', p_name);
            return;
        exception when lock_not_available or deadlock_detected then
            v_try := v_try + 1;
            if v_try >= 20 then
                raise;
            end if;
            perform pg_sleep(0.05 * v_try);
        end;
    end loop;
end $_$;


--
-- Name: jobs_partition_name(date); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.jobs_partition_name(p_day date) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ select 'jobs_done_' || to_char(p_day, 'YYYYMMDD') $$;


--
-- Name: jobs_partitions_ensure(date, integer); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.jobs_partitions_ensure(p_from date, p_days integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '200ms'
    AS $$
declare
    v_day     date;
    v_name    text;
    v_lo      timestamptz;
    v_hi      timestamptz;
    v_created integer := 0;
    v_try     integer;
begin
    if p_days < 0 or p_days > 366 then
        raise exception 'tickq: p_days must be between 0 and 366, got %', p_days
            using errcode = 'invalid_parameter_value';
    end if;
    for v_day in
        select d::date from generate_series(p_from, p_from + p_days, interval '1 day') d
        union
        select distinct (finished_at at time zone 'UTC')::date
        from tickq.jobs_done_default where finished_at is not null
        order by 1
    loop
        v_name := tickq.jobs_partition_name(v_day);
        continue when to_regclass('tickq.' || v_name) is not null;
        v_lo := v_day::timestamp at time zone 'UTC';
        v_hi := (v_day + 1)::timestamp at time zone 'UTC';
        v_try := 0;
        loop
            begin
                -- The default partition first: a finish on this day must not land there
                -- between the move below and the attach, which would then fail its check.
                -- Attaching takes this lock anyway; taken first, it also covers the move.
                lock table tickq.jobs_done_default in access exclusive mode;
                execute format(
                    'create table tickq.%I (like tickq.jobs including defaults'
                    ' including constraints including storage including compression,'
                    ' constraint %I check (finished_at is not null'
                    ' and finished_at >= %L and finished_at < %L))',
                    v_name, v_name || '_bounds', v_lo, v_hi);
                -- Rows a finish put in the default partition move to their day first; the
                -- setting tells row triggers that watch the table (tests' recorders) that
                -- this is storage moving, not a job changing.
                perform set_config('tickq.moving_rows', 'on', true);
                execute format(
                    'with moved as (delete from tickq.jobs_done_default'
                    ' where finished_at >= %L and finished_at < %L returning *)'
                    ' insert into tickq.%I select * from moved', v_lo, v_hi, v_name);
                perform set_config('tickq.moving_rows', '', true);
                execute format(
                    'alter table tickq.jobs_done attach partition tickq.%I'
                    ' for values from (%L) to (%L)', v_name, v_lo, v_hi);
                v_created := v_created + 1;
                exit;
            exception when lock_not_available or deadlock_detected then
                v_try := v_try + 1;
                if v_try >= 20 then
                    raise;
                end if;
                perform pg_sleep(0.05 * v_try);
            end;
        end loop;
    end loop;
    return v_created;
end $$;


--
-- Name: jobs_settle(uuid[], text[], timestamp with time zone); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.jobs_settle(parents uuid[], statuses text[], at timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql
    AS $$
declare
    succeeded uuid[];
    failed uuid[];
    doomed_ids uuid[];
    roots uuid[];
    settled integer := 0;
    touched integer;
begin
    select coalesce(array_agg(p.id) filter (where p.status = 'succeeded'), '{}'),
           coalesce(array_agg(p.id) filter (where p.status in ('dead', 'cancelled')), '{}')
    into succeeded, failed
    from unnest(parents, statuses) as p (id, status);

    if cardinality(succeeded) > 0 then
        -- Children are locked in id order, so parents of one fan-in finishing on several
        -- workers at once queue up on the child in one order (no deadlock), and each
        -- decrement applies to the count the previous one left: released exactly once.
        perform from tickq.jobs c
        where c.id in (select d.child_id from tickq.job_dependencies d
                       where d.parent_id = any(succeeded))
          and c.status = 'waiting'
        order by c.id
        for no key update;

        update tickq.jobs c
        set pending_parents = c.pending_parents - d.done,
            status = case when c.pending_parents - d.done = 0 then 'queued' else 'waiting' end,
            updated_at = at
        from (select child_id, count(*)::integer as done
              from tickq.job_dependencies
              where parent_id = any(succeeded)
              group by child_id) d
        where c.id = d.child_id and c.status = 'waiting';
        get diagnostics touched = row_count;
        settled := settled + touched;
    end if;

    if cardinality(failed) > 0 then
        -- Descendants are followed through waiting jobs only: a cancelled job's own
        -- descendants were cancelled with it, and a job past waiting has no unfinished
        -- parent. Each is cancelled naming the failed job it descends from (the least id
        -- when several failed at once).
        with recursive doomed (id, root) as (
            select d.child_id, d.parent_id
            from tickq.job_dependencies d
            join tickq.jobs c on c.id = d.child_id and c.status = 'waiting'
            where d.parent_id = any(failed)
            union
            select d.child_id, doomed.root
            from doomed
            join tickq.job_dependencies d on d.parent_id = doomed.id
            join tickq.jobs c on c.id = d.child_id and c.status = 'waiting'
        )
        select coalesce(array_agg(r.id order by r.id), '{}'),
               coalesce(array_agg(r.root order by r.id), '{}')
        into doomed_ids, roots
        from (select distinct on (id) id, root from doomed order by id, root) r;

        perform from tickq.jobs c
        where c.id = any(doomed_ids) and c.status = 'waiting'
        order by c.id
        for no key update;

        update tickq.jobs c
        set status = 'cancelled',
            error = 'parent ' || r.root || ' is ' || p.status,
            updated_at = at,
            finished_at = at
        from unnest(doomed_ids, roots) as r (id, root)
        join unnest(parents, statuses) as p (id, status) on p.id = r.root
        where c.id = r.id and c.status = 'waiting';
        get diagnostics touched = row_count;
        settled := settled + touched;
    end if;
    return settled;
end $$;


--
-- Name: notify_jobs_enqueued(); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.notify_jobs_enqueued() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    perform pg_notify('tickq_jobs', '');
    return null;
end
$$;


--
-- Name: operator_cancel(uuid[], timestamp with time zone); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.operator_cancel(p_ids uuid[], p_now timestamp with time zone) RETURNS TABLE(id uuid, status text, outcome text)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
with requested as (
    select distinct r.id from unnest(p_ids) as r (id)
), cancelled as (
    update tickq.jobs j
    set status = case when j.status = 'running' then j.status else 'cancelled' end,
        cancel_requested = (j.status = 'running'),
        finished_at = case when j.status = 'running' then null
                           else coalesce(p_now, now()) end,
        updated_at = coalesce(p_now, now())
    where j.id in (select r.id from requested r)
      and j.status in ('waiting', 'queued', 'retrying', 'running')
    returning j.id, j.status, j.cancel_requested, j.has_children
), settled as (
    select case when count(*) > 0
                then tickq.jobs_settle(array_agg(c.id), array_agg(c.status),
                                       coalesce(p_now, now()))
           end as children
    from cancelled c
    where c.has_children and c.status = 'cancelled'
)
select r.id,
       coalesce(c.status, j.status),
       case when c.cancel_requested then 'asked to stop'
            when c.id is not null then 'cancelled'
            when j.id is null then 'not found'
            else 'not cancellable' end
from requested r
cross join settled
left join cancelled c on c.id = r.id
left join tickq.jobs j on j.id = r.id
order by r.id
$$;


--
-- Name: operator_count_dead(text[], text[]); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.operator_count_dead(p_types text[], p_queues text[]) RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
select count(*) from tickq.jobs j
where j.status = 'dead'
  and (p_types is null or j.type = any(p_types))
  and (p_queues is null or j.queue = any(p_queues))
$$;


--
-- Name: operator_group_stats(timestamp with time zone); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.operator_group_stats(p_now timestamp with time zone) RETURNS TABLE(queue text, group_key text, waiting bigint, running bigint, oldest_runnable_seconds double precision)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
    v_now timestamptz := coalesce(p_now, now());
begin
    return query
    select j.queue, j.group_key::text,
           count(*) filter (where j.status in ('queued', 'retrying') and j.run_after <= v_now),
           count(*) filter (where j.status = 'running'),
           extract(epoch from v_now - min(j.run_after) filter (
               where j.status in ('queued', 'retrying') and j.run_after <= v_now))::double precision
    from tickq.jobs j
    where j.status in ('queued', 'retrying', 'running')
    group by j.queue, j.group_key
    order by j.queue, j.group_key;
end $$;


--
-- Name: operator_job(uuid); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.operator_job(p_id uuid) RETURNS TABLE(id uuid, queue text, type text, user_id uuid, group_key text, status text, attempts integer, max_attempts integer, priority integer, progress jsonb, error text, errors jsonb, run_after timestamp with time zone, lease_until timestamp with time zone, created_at timestamp with time zone, updated_at timestamp with time zone, started_at timestamp with time zone, finished_at timestamp with time zone)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
select j.id, j.queue, j.type, j.user_id, j.group_key, j.status, j.attempts, j.max_attempts,
       j.priority, j.progress, j.error, j.errors, j.run_after, j.lease_until, j.created_at,
       j.updated_at, j.started_at, j.finished_at
from tickq.jobs j
where j.id = p_id
$$;


--
-- Name: operator_jobs(text[], text[], text[], text[], text, timestamp with time zone, timestamp with time zone, timestamp with time zone, uuid, integer); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.operator_jobs(p_statuses text[], p_types text[], p_queues text[], p_groups text[], p_error text, p_created_from timestamp with time zone, p_created_to timestamp with time zone, p_after_created timestamp with time zone, p_after_id uuid, p_limit integer) RETURNS TABLE(id uuid, queue text, type text, user_id uuid, group_key text, status text, attempts integer, max_attempts integer, priority integer, progress jsonb, error text, run_after timestamp with time zone, created_at timestamp with time zone, updated_at timestamp with time zone, finished_at timestamp with time zone)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
select j.id, j.queue, j.type, j.user_id, j.group_key, j.status, j.attempts, j.max_attempts,
       j.priority, j.progress, j.error, j.run_after, j.created_at, j.updated_at,
       j.finished_at
from tickq.jobs j
where (p_statuses is null or j.status = any(p_statuses))
  and (p_types is null or j.type = any(p_types))
  and (p_queues is null or j.queue = any(p_queues))
  and (p_groups is null or j.group_key = any(p_groups))
  and (p_error is null or strpos(lower(j.error), lower(p_error)) > 0)
  and (p_created_from is null or j.created_at >= p_created_from)
  and (p_created_to is null or j.created_at < p_created_to)
  and (p_after_created is null or (j.created_at, j.id) < (p_after_created, p_after_id))
order by j.created_at desc, j.id desc
limit p_limit
$$;


--
-- Name: operator_retry(uuid[], timestamp with time zone); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.operator_retry(p_ids uuid[], p_now timestamp with time zone) RETURNS TABLE(id uuid, status text, outcome text)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
with requested as (
    select distinct r.id from unnest(p_ids) as r (id)
), candidates as (
    select j.id, j.idempotency_key, j.user_id, j.finished_at
    from tickq.jobs j
    where j.id in (select r.id from requested r) and j.status in ('dead', 'cancelled')
    for update skip locked
), blocked as (
    select c.id from candidates c
    where exists (select from tickq.job_dependencies d
                  join tickq.jobs p on p.id = d.parent_id
                  where d.child_id = c.id and p.status <> 'succeeded')
), chosen as (
    select c.id from candidates c
    where c.id not in (select b.id from blocked b)
      and (c.idempotency_key is null
       or (not exists (select from tickq.job_keys k
                       where k.idempotency_key = c.idempotency_key
                         and k.user_id is not distinct from c.user_id)
           and not exists (select from candidates n
                           where n.idempotency_key = c.idempotency_key
                             and n.user_id is not distinct from c.user_id
                             and (n.finished_at, n.id) > (c.finished_at, c.id))))
), retried as (
    update tickq.jobs j
    set status = 'queued',
        attempts = 0,
        run_after = coalesce(p_now, now()),
        cancel_requested = false,
        finished_at = null,
        updated_at = coalesce(p_now, now())
    from chosen
    where j.id = chosen.id
    returning j.id, j.status
)
select r.id,
       coalesce(t.status, j.status),
       case when t.id is not null then 'retried'
            when j.id is null then 'not found'
            when j.status not in ('dead', 'cancelled') then 'not retryable'
            when b.id is not null then 'parents unfinished'
            else 'key taken' end
from requested r
left join retried t on t.id = r.id
left join blocked b on b.id = r.id
left join tickq.jobs j on j.id = r.id
order by r.id
$$;


--
-- Name: operator_retry_dead(text[], text[], bigint, timestamp with time zone); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.operator_retry_dead(p_types text[], p_queues text[], p_expected bigint, p_now timestamp with time zone) RETURNS TABLE(id uuid, status text, outcome text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
declare
    v_ids uuid[];
begin
    select array_agg(j.id) into v_ids
    from (select j.id from tickq.jobs j
          where j.status = 'dead'
            and (p_types is null or j.type = any(p_types))
            and (p_queues is null or j.queue = any(p_queues))
          limit p_expected + 1
          for update) j;
    if coalesce(cardinality(v_ids), 0) <> p_expected then
        raise exception 'tickq: the dead jobs changed since they were counted'
            using errcode = 'TQ409',
                  detail = tickq.operator_count_dead(p_types, p_queues)::text;
    end if;
    return query select * from tickq.operator_retry(v_ids, p_now);
end $$;


--
-- Name: operator_stats(timestamp with time zone); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.operator_stats(p_now timestamp with time zone) RETURNS TABLE(queue text, type text, status text, count bigint, oldest_runnable_seconds double precision)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
select j.queue, j.type, j.status, count(*),
       extract(epoch from coalesce(p_now, now())
               - min(j.run_after) filter (
                   where j.status in ('queued', 'retrying')
                     and j.run_after <= coalesce(p_now, now())))::double precision
from tickq.jobs j
group by j.queue, j.type, j.status
order by j.queue, j.type, j.status
$$;


--
-- Name: queue_admit(text[], integer[]); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.queue_admit(p_queues text[], p_counts integer[]) RETURNS TABLE(queue text, depth bigint, max_depth integer)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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


--
-- Name: queue_pause(text, text, text, timestamp with time zone); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.queue_pause(p_queue text, p_by text, p_reason text, p_now timestamp with time zone) RETURNS TABLE(queue text, paused_by text, paused_at timestamp with time zone, reason text)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
insert into tickq.queue_pauses as p (queue, paused_by, paused_at, reason)
values (p_queue, p_by, coalesce(p_now, now()), p_reason)
on conflict on constraint queue_pauses_pkey do update set queue = p.queue
returning p.queue, p.paused_by, p.paused_at, p.reason
$$;


--
-- Name: queue_pauses_list(); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.queue_pauses_list() RETURNS TABLE(queue text, paused_by text, paused_at timestamp with time zone, reason text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
select p.queue, p.paused_by, p.paused_at, p.reason from tickq.queue_pauses p order by p.queue
$$;


--
-- Name: queue_resume(text); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.queue_resume(p_queue text) RETURNS TABLE(queue text, paused_by text, paused_at timestamp with time zone, reason text)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
delete from tickq.queue_pauses p where p.queue = p_queue
returning p.queue, p.paused_by, p.paused_at, p.reason
$$;


--
-- Name: rls_bypass_reason(); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.rls_bypass_reason() RETURNS text
    LANGUAGE sql STABLE
    AS $$
select case
    when r.rolsuper then 'is a superuser'
    when r.rolbypassrls then 'has BYPASSRLS'
    when pg_catalog.pg_has_role(current_user, c.relowner, 'USAGE') then 'owns tickq.jobs'
    when pg_catalog.pg_has_role(current_user, 'tickq_worker', 'USAGE')
        then 'has the privileges of tickq_worker'
end
from pg_catalog.pg_roles r, pg_catalog.pg_class c
where r.rolname = current_user and c.oid = 'tickq.jobs'::regclass
$$;


--
-- Name: throughput(timestamp with time zone, integer, text, timestamp with time zone); Type: FUNCTION; Schema: tickq; Owner: -
--

CREATE FUNCTION tickq.throughput(p_since timestamp with time zone, p_bucket_seconds integer, p_queue text, p_now timestamp with time zone) RETURNS TABLE(bucket timestamp with time zone, succeeded bigint, failed bigint, dead bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
with buckets as (
    select b as bucket
    from generate_series(
        to_timestamp(floor(extract(epoch from p_since) / p_bucket_seconds) * p_bucket_seconds),
        coalesce(p_now, now()), make_interval(secs => p_bucket_seconds)) b
), finished as (
    select j.status, j.finished_at as at
    from tickq.jobs j
    where j.status in ('succeeded', 'dead') and j.finished_at >= p_since
      and (p_queue is null or j.queue = p_queue)
), failing as (
    select j.status, j.errors from tickq.jobs j
    where j.status in ('succeeded', 'dead', 'cancelled') and j.errors <> '[]'::jsonb
      and j.finished_at >= p_since and (p_queue is null or j.queue = p_queue)
    union all
    select j.status, j.errors from tickq.jobs j
    where j.status = 'retrying' and j.updated_at >= p_since
      and (p_queue is null or j.queue = p_queue)
    union all
    select j.status, j.errors from tickq.jobs j
    where j.status = 'running' and j.lease_until > '-infinity' and j.errors <> '[]'::jsonb
      and (p_queue is null or j.queue = p_queue)
), failures as (
    select (e.entry ->> 'at')::timestamptz as at
    from failing f, jsonb_array_elements(f.errors) with ordinality as e (entry, n)
    where not (f.status = 'dead' and e.n = jsonb_array_length(f.errors))
), events as (
    select status, at from finished
    union all
    select 'failed', at from failures where at >= p_since
)
select b.bucket,
       count(*) filter (where e.status = 'succeeded'),
       count(*) filter (where e.status = 'failed'),
       count(*) filter (where e.status = 'dead')
from buckets b
left join events e
    on e.at >= b.bucket and e.at < b.bucket + make_interval(secs => p_bucket_seconds)
group by b.bucket
order by b.bucket
$$;


SET LOCAL default_table_access_method = heap;

--
-- Name: job_dependencies; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.job_dependencies (
    child_id uuid NOT NULL,
    parent_id uuid NOT NULL,
    user_id uuid
);

ALTER TABLE ONLY tickq.job_dependencies FORCE ROW LEVEL SECURITY;


--
-- Name: job_keys; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.job_keys (
    idempotency_key text NOT NULL,
    user_id uuid,
    job_id uuid NOT NULL
);

ALTER TABLE ONLY tickq.job_keys FORCE ROW LEVEL SECURITY;


--
-- Name: job_signals; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.job_signals (
    job_id uuid NOT NULL,
    name text NOT NULL,
    payload jsonb,
    size integer NOT NULL,
    sent_at timestamp with time zone NOT NULL,
    CONSTRAINT job_signals_name_check CHECK ((name <> ''::text))
);

ALTER TABLE ONLY tickq.job_signals FORCE ROW LEVEL SECURITY;


--
-- Name: job_steps; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.job_steps (
    job_id uuid NOT NULL,
    name text NOT NULL,
    result jsonb,
    size integer NOT NULL,
    finished_at timestamp with time zone NOT NULL,
    CONSTRAINT job_steps_name_check CHECK ((name <> ''::text))
);

ALTER TABLE ONLY tickq.job_steps FORCE ROW LEVEL SECURITY;


--
-- Name: jobs_done; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.jobs_done (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL,
    type text NOT NULL,
    user_id uuid,
    status text DEFAULT 'queued'::text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    idempotency_key text,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 3 NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    run_after timestamp with time zone DEFAULT now() NOT NULL,
    lease_until timestamp with time zone,
    lease_token uuid,
    progress jsonb,
    result jsonb,
    error text,
    errors jsonb DEFAULT '[]'::jsonb NOT NULL,
    lease_seconds integer,
    backoff_base double precision DEFAULT 1 NOT NULL,
    backoff_factor double precision DEFAULT 2 NOT NULL,
    backoff_max double precision DEFAULT 300 NOT NULL,
    backoff_jitter double precision DEFAULT 0 NOT NULL,
    cancel_requested boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    resumes integer,
    wait_kind text,
    wait_name text,
    wait_until timestamp with time zone,
    signals text[],
    pending_parents integer DEFAULT 0 NOT NULL,
    has_children boolean DEFAULT false NOT NULL,
    group_key text DEFAULT ''::text NOT NULL COLLATE pg_catalog."C",
    CONSTRAINT jobs_attempts_check CHECK (((attempts >= 0) AND (attempts <= max_attempts))),
    CONSTRAINT jobs_backoff_check CHECK (((backoff_base > (0)::double precision) AND (backoff_factor >= (1)::double precision) AND (backoff_max >= backoff_base) AND ((backoff_jitter >= (0)::double precision) AND (backoff_jitter <= (1)::double precision)))),
    CONSTRAINT jobs_group_key_check CHECK ((char_length(group_key) <= 128)),
    CONSTRAINT jobs_lease_check CHECK (((status = 'running'::text) = ((lease_token IS NOT NULL) AND (lease_until IS NOT NULL)))),
    CONSTRAINT jobs_lease_seconds_check CHECK (((lease_seconds IS NULL) OR (lease_seconds > 0))),
    CONSTRAINT jobs_max_attempts_check CHECK ((max_attempts >= 1)),
    CONSTRAINT jobs_payload_object CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT jobs_pending_parents_check CHECK ((pending_parents >= 0)),
    CONSTRAINT jobs_status_check CHECK ((status = ANY (ARRAY['waiting'::text, 'queued'::text, 'running'::text, 'retrying'::text, 'succeeded'::text, 'dead'::text, 'cancelled'::text]))),
    CONSTRAINT jobs_wait_kind_check CHECK ((wait_kind = ANY (ARRAY['suspend'::text, 'sleep'::text, 'signal'::text])))
)
PARTITION BY RANGE (finished_at);


--
-- Name: jobs_done_default; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.jobs_done_default (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL,
    type text NOT NULL,
    user_id uuid,
    status text DEFAULT 'queued'::text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    idempotency_key text,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 3 NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    run_after timestamp with time zone DEFAULT now() NOT NULL,
    lease_until timestamp with time zone,
    lease_token uuid,
    progress jsonb,
    result jsonb,
    error text,
    errors jsonb DEFAULT '[]'::jsonb NOT NULL,
    lease_seconds integer,
    backoff_base double precision DEFAULT 1 NOT NULL,
    backoff_factor double precision DEFAULT 2 NOT NULL,
    backoff_max double precision DEFAULT 300 NOT NULL,
    backoff_jitter double precision DEFAULT 0 NOT NULL,
    cancel_requested boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    resumes integer,
    wait_kind text,
    wait_name text,
    wait_until timestamp with time zone,
    signals text[],
    pending_parents integer DEFAULT 0 NOT NULL,
    has_children boolean DEFAULT false NOT NULL,
    group_key text DEFAULT ''::text NOT NULL COLLATE pg_catalog."C",
    CONSTRAINT jobs_attempts_check CHECK (((attempts >= 0) AND (attempts <= max_attempts))),
    CONSTRAINT jobs_backoff_check CHECK (((backoff_base > (0)::double precision) AND (backoff_factor >= (1)::double precision) AND (backoff_max >= backoff_base) AND ((backoff_jitter >= (0)::double precision) AND (backoff_jitter <= (1)::double precision)))),
    CONSTRAINT jobs_group_key_check CHECK ((char_length(group_key) <= 128)),
    CONSTRAINT jobs_lease_check CHECK (((status = 'running'::text) = ((lease_token IS NOT NULL) AND (lease_until IS NOT NULL)))),
    CONSTRAINT jobs_lease_seconds_check CHECK (((lease_seconds IS NULL) OR (lease_seconds > 0))),
    CONSTRAINT jobs_max_attempts_check CHECK ((max_attempts >= 1)),
    CONSTRAINT jobs_payload_object CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT jobs_pending_parents_check CHECK ((pending_parents >= 0)),
    CONSTRAINT jobs_status_check CHECK ((status = ANY (ARRAY['waiting'::text, 'queued'::text, 'running'::text, 'retrying'::text, 'succeeded'::text, 'dead'::text, 'cancelled'::text]))),
    CONSTRAINT jobs_wait_kind_check CHECK ((wait_kind = ANY (ARRAY['suspend'::text, 'sleep'::text, 'signal'::text])))
);


--
-- Name: jobs_live; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.jobs_live (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL,
    type text NOT NULL,
    user_id uuid,
    status text DEFAULT 'queued'::text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    idempotency_key text,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 3 NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    run_after timestamp with time zone DEFAULT now() NOT NULL,
    lease_until timestamp with time zone,
    lease_token uuid,
    progress jsonb,
    result jsonb,
    error text,
    errors jsonb DEFAULT '[]'::jsonb NOT NULL,
    lease_seconds integer,
    backoff_base double precision DEFAULT 1 NOT NULL,
    backoff_factor double precision DEFAULT 2 NOT NULL,
    backoff_max double precision DEFAULT 300 NOT NULL,
    backoff_jitter double precision DEFAULT 0 NOT NULL,
    cancel_requested boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    resumes integer,
    wait_kind text,
    wait_name text,
    wait_until timestamp with time zone,
    signals text[],
    pending_parents integer DEFAULT 0 NOT NULL,
    has_children boolean DEFAULT false NOT NULL,
    group_key text DEFAULT ''::text NOT NULL COLLATE pg_catalog."C",
    CONSTRAINT jobs_attempts_check CHECK (((attempts >= 0) AND (attempts <= max_attempts))),
    CONSTRAINT jobs_backoff_check CHECK (((backoff_base > (0)::double precision) AND (backoff_factor >= (1)::double precision) AND (backoff_max >= backoff_base) AND ((backoff_jitter >= (0)::double precision) AND (backoff_jitter <= (1)::double precision)))),
    CONSTRAINT jobs_group_key_check CHECK ((char_length(group_key) <= 128)),
    CONSTRAINT jobs_lease_check CHECK (((status = 'running'::text) = ((lease_token IS NOT NULL) AND (lease_until IS NOT NULL)))),
    CONSTRAINT jobs_lease_seconds_check CHECK (((lease_seconds IS NULL) OR (lease_seconds > 0))),
    CONSTRAINT jobs_max_attempts_check CHECK ((max_attempts >= 1)),
    CONSTRAINT jobs_payload_object CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT jobs_pending_parents_check CHECK ((pending_parents >= 0)),
    CONSTRAINT jobs_status_check CHECK ((status = ANY (ARRAY['waiting'::text, 'queued'::text, 'running'::text, 'retrying'::text, 'succeeded'::text, 'dead'::text, 'cancelled'::text]))),
    CONSTRAINT jobs_wait_kind_check CHECK ((wait_kind = ANY (ARRAY['suspend'::text, 'sleep'::text, 'signal'::text])))
)
WITH (autovacuum_vacuum_scale_factor='0.01', autovacuum_vacuum_threshold='1000', autovacuum_vacuum_insert_scale_factor='0.01', autovacuum_analyze_scale_factor='0.02', autovacuum_vacuum_cost_delay='0');
ALTER TABLE ONLY tickq.jobs_live ALTER COLUMN id SET (n_distinct=-1);


--
-- Name: queue_depth_samples; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.queue_depth_samples (
    sampled_at timestamp with time zone NOT NULL,
    queue text NOT NULL,
    depth bigint NOT NULL,
    running bigint NOT NULL,
    oldest_runnable_seconds double precision
);


--
-- Name: queue_group_limits; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.queue_group_limits (
    queue text NOT NULL,
    max_running_per_group integer NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT queue_group_limits_check CHECK ((max_running_per_group >= 1))
);


--
-- Name: queue_limits; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.queue_limits (
    queue text NOT NULL,
    max_depth integer NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT queue_limits_max_depth_check CHECK ((max_depth >= 1))
);


--
-- Name: queue_pauses; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.queue_pauses (
    queue text NOT NULL,
    paused_by text NOT NULL,
    paused_at timestamp with time zone DEFAULT now() NOT NULL,
    reason text,
    CONSTRAINT queue_pauses_reason_check CHECK (((reason IS NULL) OR (length(reason) <= 500)))
);


--
-- Name: retention_policies; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.retention_policies (
    id bigint NOT NULL,
    queue text,
    type text,
    statuses text[] DEFAULT '{succeeded,cancelled}'::text[] NOT NULL,
    max_age_seconds double precision,
    keep_last integer,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT retention_policies_keep_last_check CHECK (((keep_last IS NULL) OR (keep_last >= 0))),
    CONSTRAINT retention_policies_max_age_check CHECK (((max_age_seconds IS NULL) OR (max_age_seconds >= (0)::double precision))),
    CONSTRAINT retention_policies_rule_check CHECK (((max_age_seconds IS NOT NULL) OR (keep_last IS NOT NULL))),
    CONSTRAINT retention_policies_statuses_check CHECK (((cardinality(statuses) >= 1) AND (statuses <@ ARRAY['succeeded'::text, 'cancelled'::text, 'dead'::text])))
);


--
-- Name: retention_policies_id_seq; Type: SEQUENCE; Schema: tickq; Owner: -
--

ALTER TABLE tickq.retention_policies ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME tickq.retention_policies_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: schedules; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.schedules (
    name text NOT NULL,
    cron text NOT NULL,
    timezone text DEFAULT 'UTC'::text NOT NULL,
    type text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 3 NOT NULL,
    missed text DEFAULT 'latest'::text NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    last_fired timestamp with time zone,
    next_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    group_key text,
    CONSTRAINT schedules_max_attempts_check CHECK ((max_attempts >= 1)),
    CONSTRAINT schedules_missed_check CHECK ((missed = ANY (ARRAY['latest'::text, 'skip'::text]))),
    CONSTRAINT schedules_payload_object CHECK ((jsonb_typeof(payload) = 'object'::text))
);


--
-- Name: schema_migrations; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.schema_migrations (
    version text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: type_limits; Type: TABLE; Schema: tickq; Owner: -
--

CREATE TABLE tickq.type_limits (
    type text NOT NULL,
    max_running integer,
    rate_limit integer,
    rate_period_seconds double precision,
    recent_at timestamp with time zone[] DEFAULT '{}'::timestamp with time zone[] NOT NULL,
    recent_n integer[] DEFAULT '{}'::integer[] NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    max_running_per_group integer,
    CONSTRAINT type_limits_max_running_check CHECK (((max_running IS NULL) OR (max_running >= 1))),
    CONSTRAINT type_limits_per_group_check CHECK (((max_running_per_group IS NULL) OR (max_running_per_group >= 1))),
    CONSTRAINT type_limits_rate_check CHECK ((((rate_limit IS NULL) = (rate_period_seconds IS NULL)) AND ((rate_limit IS NULL) OR (rate_limit >= 1)) AND ((rate_period_seconds IS NULL) OR (rate_period_seconds > (0)::double precision)))),
    CONSTRAINT type_limits_some_check CHECK (((max_running IS NOT NULL) OR (rate_limit IS NOT NULL) OR (max_running_per_group IS NOT NULL)))
);


--
-- Name: jobs_done; Type: TABLE ATTACH; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.jobs ATTACH PARTITION tickq.jobs_done FOR VALUES IN ('succeeded', 'dead', 'cancelled');


--
-- Name: jobs_done_default; Type: TABLE ATTACH; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.jobs_done ATTACH PARTITION tickq.jobs_done_default DEFAULT;


--
-- Name: jobs_live; Type: TABLE ATTACH; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.jobs ATTACH PARTITION tickq.jobs_live FOR VALUES IN ('waiting', 'queued', 'running', 'retrying');


--
-- Name: job_dependencies job_dependencies_pkey; Type: CONSTRAINT; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.job_dependencies
    ADD CONSTRAINT job_dependencies_pkey PRIMARY KEY (child_id, parent_id);


--
-- Name: job_keys job_keys_key; Type: CONSTRAINT; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.job_keys
    ADD CONSTRAINT job_keys_key UNIQUE NULLS NOT DISTINCT (idempotency_key, user_id);


--
-- Name: job_signals job_signals_pkey; Type: CONSTRAINT; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.job_signals
    ADD CONSTRAINT job_signals_pkey PRIMARY KEY (job_id, name);


--
-- Name: job_steps job_steps_pkey; Type: CONSTRAINT; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.job_steps
    ADD CONSTRAINT job_steps_pkey PRIMARY KEY (job_id, name);


--
-- Name: queue_depth_samples queue_depth_samples_pkey; Type: CONSTRAINT; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.queue_depth_samples
    ADD CONSTRAINT queue_depth_samples_pkey PRIMARY KEY (sampled_at, queue);


--
-- Name: queue_group_limits queue_group_limits_pkey; Type: CONSTRAINT; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.queue_group_limits
    ADD CONSTRAINT queue_group_limits_pkey PRIMARY KEY (queue);


--
-- Name: queue_limits queue_limits_pkey; Type: CONSTRAINT; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.queue_limits
    ADD CONSTRAINT queue_limits_pkey PRIMARY KEY (queue);


--
-- Name: queue_pauses queue_pauses_pkey; Type: CONSTRAINT; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.queue_pauses
    ADD CONSTRAINT queue_pauses_pkey PRIMARY KEY (queue);


--
-- Name: retention_policies retention_policies_pkey; Type: CONSTRAINT; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.retention_policies
    ADD CONSTRAINT retention_policies_pkey PRIMARY KEY (id);


--
-- Name: retention_policies retention_policies_scope_key; Type: CONSTRAINT; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.retention_policies
    ADD CONSTRAINT retention_policies_scope_key UNIQUE NULLS NOT DISTINCT (queue, type);


--
-- Name: schedules schedules_pkey; Type: CONSTRAINT; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.schedules
    ADD CONSTRAINT schedules_pkey PRIMARY KEY (name);


--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);


--
-- Name: type_limits type_limits_pkey; Type: CONSTRAINT; Schema: tickq; Owner: -
--

ALTER TABLE ONLY tickq.type_limits
    ADD CONSTRAINT type_limits_pkey PRIMARY KEY (type);


--
-- Name: job_dependencies_parent_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX job_dependencies_parent_idx ON tickq.job_dependencies USING btree (parent_id);


--
-- Name: jobs_claim_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_claim_idx ON tickq.jobs_live USING btree (queue, priority DESC, run_after, created_at) WHERE (status = ANY (ARRAY['queued'::text, 'retrying'::text]));


--
-- Name: jobs_failed_finished_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_failed_finished_idx ON ONLY tickq.jobs_done USING btree (finished_at) WHERE (errors <> '[]'::jsonb);


--
-- Name: jobs_done_parents_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_done_parents_idx ON ONLY tickq.jobs_done USING btree (finished_at) WHERE has_children;


--
-- Name: jobs_id_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_id_idx ON ONLY tickq.jobs USING btree (id);


--
-- Name: jobs_done_id_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_done_id_idx ON ONLY tickq.jobs_done USING btree (id);


--
-- Name: jobs_finished_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_finished_idx ON ONLY tickq.jobs_done USING btree (status, finished_at);


--
-- Name: jobs_owner_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_owner_idx ON ONLY tickq.jobs USING btree (user_id, created_at DESC, id DESC) WHERE (user_id IS NOT NULL);


--
-- Name: jobs_done_user_id_created_at_id_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_done_user_id_created_at_id_idx ON ONLY tickq.jobs_done USING btree (user_id, created_at DESC, id DESC) WHERE (user_id IS NOT NULL);


--
-- Name: jobs_done_default_finished_at_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_done_default_finished_at_idx ON tickq.jobs_done_default USING btree (finished_at) WHERE (errors <> '[]'::jsonb);


--
-- Name: jobs_done_default_finished_at_idx1; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_done_default_finished_at_idx1 ON tickq.jobs_done_default USING btree (finished_at) WHERE has_children;


--
-- Name: jobs_done_default_id_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_done_default_id_idx ON tickq.jobs_done_default USING btree (id);


--
-- Name: jobs_done_default_status_finished_at_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_done_default_status_finished_at_idx ON tickq.jobs_done_default USING btree (status, finished_at);


--
-- Name: jobs_done_default_user_id_created_at_id_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_done_default_user_id_created_at_id_idx ON tickq.jobs_done_default USING btree (user_id, created_at DESC, id DESC) WHERE (user_id IS NOT NULL);


--
-- Name: jobs_fair_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_fair_idx ON tickq.jobs_live USING btree (queue, priority DESC, group_key, run_after, created_at) WHERE (status = ANY (ARRAY['queued'::text, 'retrying'::text]));


--
-- Name: jobs_lease_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_lease_idx ON tickq.jobs_live USING btree (lease_until) WHERE (status = 'running'::text);


--
-- Name: jobs_live_id_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_live_id_idx ON tickq.jobs_live USING btree (id);


--
-- Name: jobs_live_user_id_created_at_id_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_live_user_id_created_at_id_idx ON tickq.jobs_live USING btree (user_id, created_at DESC, id DESC) WHERE (user_id IS NOT NULL);


--
-- Name: jobs_retrying_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX jobs_retrying_idx ON tickq.jobs_live USING btree (updated_at) WHERE (status = 'retrying'::text);


--
-- Name: schedules_due_idx; Type: INDEX; Schema: tickq; Owner: -
--

CREATE INDEX schedules_due_idx ON tickq.schedules USING btree (next_at) WHERE enabled;


--
-- Name: jobs_done_default_finished_at_idx; Type: INDEX ATTACH; Schema: tickq; Owner: -
--

ALTER INDEX tickq.jobs_failed_finished_idx ATTACH PARTITION tickq.jobs_done_default_finished_at_idx;


--
-- Name: jobs_done_default_finished_at_idx1; Type: INDEX ATTACH; Schema: tickq; Owner: -
--

ALTER INDEX tickq.jobs_done_parents_idx ATTACH PARTITION tickq.jobs_done_default_finished_at_idx1;


--
-- Name: jobs_done_default_id_idx; Type: INDEX ATTACH; Schema: tickq; Owner: -
--

ALTER INDEX tickq.jobs_done_id_idx ATTACH PARTITION tickq.jobs_done_default_id_idx;


--
-- Name: jobs_done_default_status_finished_at_idx; Type: INDEX ATTACH; Schema: tickq; Owner: -
--

ALTER INDEX tickq.jobs_finished_idx ATTACH PARTITION tickq.jobs_done_default_status_finished_at_idx;


--
-- Name: jobs_done_default_user_id_created_at_id_idx; Type: INDEX ATTACH; Schema: tickq; Owner: -
--

ALTER INDEX tickq.jobs_done_user_id_created_at_id_idx ATTACH PARTITION tickq.jobs_done_default_user_id_created_at_id_idx;


--
-- Name: jobs_done_id_idx; Type: INDEX ATTACH; Schema: tickq; Owner: -
--

ALTER INDEX tickq.jobs_id_idx ATTACH PARTITION tickq.jobs_done_id_idx;


--
-- Name: jobs_done_user_id_created_at_id_idx; Type: INDEX ATTACH; Schema: tickq; Owner: -
--

ALTER INDEX tickq.jobs_owner_idx ATTACH PARTITION tickq.jobs_done_user_id_created_at_id_idx;


--
-- Name: jobs_live_id_idx; Type: INDEX ATTACH; Schema: tickq; Owner: -
--

ALTER INDEX tickq.jobs_id_idx ATTACH PARTITION tickq.jobs_live_id_idx;


--
-- Name: jobs_live_user_id_created_at_id_idx; Type: INDEX ATTACH; Schema: tickq; Owner: -
--

ALTER INDEX tickq.jobs_owner_idx ATTACH PARTITION tickq.jobs_live_user_id_created_at_id_idx;


--
-- Name: jobs jobs_app_admit; Type: TRIGGER; Schema: tickq; Owner: -
--

CREATE TRIGGER jobs_app_admit AFTER INSERT ON tickq.jobs FOR EACH ROW WHEN ((COALESCE(current_setting('tickq.user_id'::text, true), ''::text) <> ''::text)) EXECUTE FUNCTION tickq.jobs_app_admit();


--
-- Name: jobs jobs_app_guard; Type: TRIGGER; Schema: tickq; Owner: -
--

CREATE TRIGGER jobs_app_guard BEFORE UPDATE ON tickq.jobs FOR EACH ROW WHEN ((COALESCE(current_setting('tickq.user_id'::text, true), ''::text) <> ''::text)) EXECUTE FUNCTION tickq.jobs_app_guard();


--
-- Name: jobs jobs_forget; Type: TRIGGER; Schema: tickq; Owner: -
--

CREATE TRIGGER jobs_forget AFTER DELETE ON tickq.jobs REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION tickq.jobs_forget();


--
-- Name: jobs jobs_forget_all; Type: TRIGGER; Schema: tickq; Owner: -
--

CREATE TRIGGER jobs_forget_all AFTER TRUNCATE ON tickq.jobs FOR EACH STATEMENT EXECUTE FUNCTION tickq.jobs_forget_all();


--
-- Name: jobs jobs_key_free; Type: TRIGGER; Schema: tickq; Owner: -
--

CREATE TRIGGER jobs_key_free BEFORE UPDATE ON tickq.jobs FOR EACH ROW WHEN (((old.idempotency_key IS NOT NULL) AND (new.status = ANY (ARRAY['dead'::text, 'cancelled'::text])) AND (old.status <> ALL (ARRAY['dead'::text, 'cancelled'::text])))) EXECUTE FUNCTION tickq.job_keys_free();


--
-- Name: jobs jobs_key_take; Type: TRIGGER; Schema: tickq; Owner: -
--

CREATE TRIGGER jobs_key_take BEFORE UPDATE ON tickq.jobs FOR EACH ROW WHEN (((old.idempotency_key IS NOT NULL) AND (old.status = ANY (ARRAY['dead'::text, 'cancelled'::text])) AND (new.status <> ALL (ARRAY['dead'::text, 'cancelled'::text])))) EXECUTE FUNCTION tickq.job_keys_take();


--
-- Name: jobs jobs_keys_truncate; Type: TRIGGER; Schema: tickq; Owner: -
--

CREATE TRIGGER jobs_keys_truncate AFTER TRUNCATE ON tickq.jobs FOR EACH STATEMENT EXECUTE FUNCTION tickq.job_keys_truncate();


--
-- Name: jobs jobs_notify_enqueued; Type: TRIGGER; Schema: tickq; Owner: -
--

CREATE TRIGGER jobs_notify_enqueued AFTER INSERT ON tickq.jobs FOR EACH STATEMENT EXECUTE FUNCTION tickq.notify_jobs_enqueued();


--
-- Name: job_dependencies; Type: ROW SECURITY; Schema: tickq; Owner: -
--

ALTER TABLE tickq.job_dependencies ENABLE ROW LEVEL SECURITY;

--
-- Name: job_dependencies job_dependencies_owner; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_dependencies_owner ON tickq.job_dependencies TO tickq_app USING ((user_id = tickq.current_user_id())) WITH CHECK ((user_id = tickq.current_user_id()));


--
-- Name: job_dependencies job_dependencies_table_owner; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_dependencies_table_owner ON tickq.job_dependencies TO CURRENT_USER USING (true) WITH CHECK (true);


--
-- Name: job_dependencies job_dependencies_worker; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_dependencies_worker ON tickq.job_dependencies TO tickq_worker USING (true) WITH CHECK (true);


--
-- Name: job_keys; Type: ROW SECURITY; Schema: tickq; Owner: -
--

ALTER TABLE tickq.job_keys ENABLE ROW LEVEL SECURITY;

--
-- Name: job_keys job_keys_owner; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_keys_owner ON tickq.job_keys TO tickq_app USING ((user_id = tickq.current_user_id())) WITH CHECK ((user_id = tickq.current_user_id()));


--
-- Name: job_keys job_keys_table_owner; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_keys_table_owner ON tickq.job_keys TO CURRENT_USER USING (true) WITH CHECK (true);


--
-- Name: job_keys job_keys_worker; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_keys_worker ON tickq.job_keys TO tickq_worker USING (true) WITH CHECK (true);


--
-- Name: job_signals; Type: ROW SECURITY; Schema: tickq; Owner: -
--

ALTER TABLE tickq.job_signals ENABLE ROW LEVEL SECURITY;

--
-- Name: job_signals job_signals_owner; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_signals_owner ON tickq.job_signals FOR SELECT TO tickq_app USING ((EXISTS ( SELECT
   FROM tickq.jobs j
  WHERE ((j.id = job_signals.job_id) AND (j.user_id = tickq.current_user_id())))));


--
-- Name: job_signals job_signals_owner_clear; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_signals_owner_clear ON tickq.job_signals FOR DELETE TO tickq_app USING ((EXISTS ( SELECT
   FROM tickq.jobs j
  WHERE ((j.id = job_signals.job_id) AND (j.user_id = tickq.current_user_id()) AND (j.status = ANY (ARRAY['dead'::text, 'cancelled'::text]))))));


--
-- Name: job_signals job_signals_owner_send; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_signals_owner_send ON tickq.job_signals FOR INSERT TO tickq_app WITH CHECK ((EXISTS ( SELECT
   FROM tickq.jobs j
  WHERE ((j.id = job_signals.job_id) AND (j.user_id = tickq.current_user_id())))));


--
-- Name: job_signals job_signals_table_owner; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_signals_table_owner ON tickq.job_signals TO CURRENT_USER USING (true) WITH CHECK (true);


--
-- Name: job_signals job_signals_worker; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_signals_worker ON tickq.job_signals TO tickq_worker USING (true) WITH CHECK (true);


--
-- Name: job_steps; Type: ROW SECURITY; Schema: tickq; Owner: -
--

ALTER TABLE tickq.job_steps ENABLE ROW LEVEL SECURITY;

--
-- Name: job_steps job_steps_owner; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_steps_owner ON tickq.job_steps FOR SELECT TO tickq_app USING ((EXISTS ( SELECT
   FROM tickq.jobs j
  WHERE ((j.id = job_steps.job_id) AND (j.user_id = tickq.current_user_id())))));


--
-- Name: job_steps job_steps_owner_clear; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_steps_owner_clear ON tickq.job_steps FOR DELETE TO tickq_app USING ((EXISTS ( SELECT
   FROM tickq.jobs j
  WHERE ((j.id = job_steps.job_id) AND (j.user_id = tickq.current_user_id()) AND (j.status = ANY (ARRAY['dead'::text, 'cancelled'::text]))))));


--
-- Name: job_steps job_steps_table_owner; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_steps_table_owner ON tickq.job_steps TO CURRENT_USER USING (true) WITH CHECK (true);


--
-- Name: job_steps job_steps_worker; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY job_steps_worker ON tickq.job_steps TO tickq_worker USING (true) WITH CHECK (true);


--
-- Name: jobs; Type: ROW SECURITY; Schema: tickq; Owner: -
--

ALTER TABLE tickq.jobs ENABLE ROW LEVEL SECURITY;

--
-- Name: jobs jobs_app_insert_status; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY jobs_app_insert_status ON tickq.jobs AS RESTRICTIVE FOR INSERT TO tickq_app WITH CHECK ((status = ANY (ARRAY['queued'::text, 'waiting'::text])));


--
-- Name: jobs jobs_owner; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY jobs_owner ON tickq.jobs TO tickq_app USING ((user_id = tickq.current_user_id())) WITH CHECK ((user_id = tickq.current_user_id()));


--
-- Name: jobs jobs_table_owner; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY jobs_table_owner ON tickq.jobs TO CURRENT_USER USING (true) WITH CHECK (true);


--
-- Name: jobs jobs_worker; Type: POLICY; Schema: tickq; Owner: -
--

CREATE POLICY jobs_worker ON tickq.jobs TO tickq_worker USING (true) WITH CHECK (true);


--
-- Name: SCHEMA tickq; Type: ACL; Schema: -; Owner: -
--

GRANT USAGE ON SCHEMA tickq TO tickq_app;
GRANT USAGE ON SCHEMA tickq TO tickq_worker;
GRANT USAGE ON SCHEMA tickq TO tickq_operator;


--
-- Name: TABLE jobs; Type: ACL; Schema: tickq; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE tickq.jobs TO tickq_worker;
GRANT SELECT ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.id; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(id) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.queue; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(queue) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.type; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(type) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.user_id; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(user_id) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.status; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(status),UPDATE(status) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.payload; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(payload) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.idempotency_key; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(idempotency_key) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.attempts; Type: ACL; Schema: tickq; Owner: -
--

GRANT UPDATE(attempts) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.max_attempts; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(max_attempts) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.priority; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(priority) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.run_after; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(run_after),UPDATE(run_after) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.error; Type: ACL; Schema: tickq; Owner: -
--

GRANT UPDATE(error) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.lease_seconds; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(lease_seconds) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.backoff_base; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(backoff_base) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.backoff_factor; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(backoff_factor) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.backoff_max; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(backoff_max) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.backoff_jitter; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(backoff_jitter) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.cancel_requested; Type: ACL; Schema: tickq; Owner: -
--

GRANT UPDATE(cancel_requested) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.created_at; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(created_at) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.updated_at; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(updated_at),UPDATE(updated_at) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.finished_at; Type: ACL; Schema: tickq; Owner: -
--

GRANT UPDATE(finished_at) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.resumes; Type: ACL; Schema: tickq; Owner: -
--

GRANT UPDATE(resumes) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.wait_kind; Type: ACL; Schema: tickq; Owner: -
--

GRANT UPDATE(wait_kind) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.wait_name; Type: ACL; Schema: tickq; Owner: -
--

GRANT UPDATE(wait_name) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.wait_until; Type: ACL; Schema: tickq; Owner: -
--

GRANT UPDATE(wait_until) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.signals; Type: ACL; Schema: tickq; Owner: -
--

GRANT UPDATE(signals) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.pending_parents; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(pending_parents) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.has_children; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(has_children),UPDATE(has_children) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: COLUMN jobs.group_key; Type: ACL; Schema: tickq; Owner: -
--

GRANT INSERT(group_key) ON TABLE tickq.jobs TO tickq_app;


--
-- Name: FUNCTION depth_history(p_since timestamp with time zone, p_queue text); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.depth_history(p_since timestamp with time zone, p_queue text) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.depth_history(p_since timestamp with time zone, p_queue text) TO tickq_operator;
GRANT ALL ON FUNCTION tickq.depth_history(p_since timestamp with time zone, p_queue text) TO tickq_worker;


--
-- Name: FUNCTION job_keys_free(); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.job_keys_free() FROM PUBLIC;


--
-- Name: FUNCTION job_keys_take(); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.job_keys_take() FROM PUBLIC;


--
-- Name: FUNCTION job_keys_truncate(); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.job_keys_truncate() FROM PUBLIC;


--
-- Name: FUNCTION jobs_forget(); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.jobs_forget() FROM PUBLIC;


--
-- Name: FUNCTION jobs_forget_all(); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.jobs_forget_all() FROM PUBLIC;


--
-- Name: FUNCTION jobs_live_id_statistics(); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.jobs_live_id_statistics() FROM PUBLIC;


--
-- Name: FUNCTION jobs_partition_drop(p_name text); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.jobs_partition_drop(p_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.jobs_partition_drop(p_name text) TO tickq_worker;


--
-- Name: FUNCTION jobs_partitions_ensure(p_from date, p_days integer); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.jobs_partitions_ensure(p_from date, p_days integer) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.jobs_partitions_ensure(p_from date, p_days integer) TO tickq_worker;


--
-- Name: FUNCTION operator_cancel(p_ids uuid[], p_now timestamp with time zone); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.operator_cancel(p_ids uuid[], p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.operator_cancel(p_ids uuid[], p_now timestamp with time zone) TO tickq_operator;
GRANT ALL ON FUNCTION tickq.operator_cancel(p_ids uuid[], p_now timestamp with time zone) TO tickq_worker;


--
-- Name: FUNCTION operator_count_dead(p_types text[], p_queues text[]); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.operator_count_dead(p_types text[], p_queues text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.operator_count_dead(p_types text[], p_queues text[]) TO tickq_operator;
GRANT ALL ON FUNCTION tickq.operator_count_dead(p_types text[], p_queues text[]) TO tickq_worker;


--
-- Name: FUNCTION operator_group_stats(p_now timestamp with time zone); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.operator_group_stats(p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.operator_group_stats(p_now timestamp with time zone) TO tickq_operator;


--
-- Name: FUNCTION operator_job(p_id uuid); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.operator_job(p_id uuid) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.operator_job(p_id uuid) TO tickq_operator;
GRANT ALL ON FUNCTION tickq.operator_job(p_id uuid) TO tickq_worker;


--
-- Name: FUNCTION operator_jobs(p_statuses text[], p_types text[], p_queues text[], p_groups text[], p_error text, p_created_from timestamp with time zone, p_created_to timestamp with time zone, p_after_created timestamp with time zone, p_after_id uuid, p_limit integer); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.operator_jobs(p_statuses text[], p_types text[], p_queues text[], p_groups text[], p_error text, p_created_from timestamp with time zone, p_created_to timestamp with time zone, p_after_created timestamp with time zone, p_after_id uuid, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.operator_jobs(p_statuses text[], p_types text[], p_queues text[], p_groups text[], p_error text, p_created_from timestamp with time zone, p_created_to timestamp with time zone, p_after_created timestamp with time zone, p_after_id uuid, p_limit integer) TO tickq_operator;
GRANT ALL ON FUNCTION tickq.operator_jobs(p_statuses text[], p_types text[], p_queues text[], p_groups text[], p_error text, p_created_from timestamp with time zone, p_created_to timestamp with time zone, p_after_created timestamp with time zone, p_after_id uuid, p_limit integer) TO tickq_worker;


--
-- Name: FUNCTION operator_retry(p_ids uuid[], p_now timestamp with time zone); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.operator_retry(p_ids uuid[], p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.operator_retry(p_ids uuid[], p_now timestamp with time zone) TO tickq_operator;
GRANT ALL ON FUNCTION tickq.operator_retry(p_ids uuid[], p_now timestamp with time zone) TO tickq_worker;


--
-- Name: FUNCTION operator_retry_dead(p_types text[], p_queues text[], p_expected bigint, p_now timestamp with time zone); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.operator_retry_dead(p_types text[], p_queues text[], p_expected bigint, p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.operator_retry_dead(p_types text[], p_queues text[], p_expected bigint, p_now timestamp with time zone) TO tickq_operator;
GRANT ALL ON FUNCTION tickq.operator_retry_dead(p_types text[], p_queues text[], p_expected bigint, p_now timestamp with time zone) TO tickq_worker;


--
-- Name: FUNCTION operator_stats(p_now timestamp with time zone); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.operator_stats(p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.operator_stats(p_now timestamp with time zone) TO tickq_operator;


--
-- Name: FUNCTION queue_admit(p_queues text[], p_counts integer[]); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.queue_admit(p_queues text[], p_counts integer[]) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.queue_admit(p_queues text[], p_counts integer[]) TO tickq_worker;


--
-- Name: FUNCTION queue_pause(p_queue text, p_by text, p_reason text, p_now timestamp with time zone); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.queue_pause(p_queue text, p_by text, p_reason text, p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.queue_pause(p_queue text, p_by text, p_reason text, p_now timestamp with time zone) TO tickq_operator;
GRANT ALL ON FUNCTION tickq.queue_pause(p_queue text, p_by text, p_reason text, p_now timestamp with time zone) TO tickq_worker;


--
-- Name: FUNCTION queue_pauses_list(); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.queue_pauses_list() FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.queue_pauses_list() TO tickq_operator;
GRANT ALL ON FUNCTION tickq.queue_pauses_list() TO tickq_worker;


--
-- Name: FUNCTION queue_resume(p_queue text); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.queue_resume(p_queue text) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.queue_resume(p_queue text) TO tickq_operator;
GRANT ALL ON FUNCTION tickq.queue_resume(p_queue text) TO tickq_worker;


--
-- Name: FUNCTION throughput(p_since timestamp with time zone, p_bucket_seconds integer, p_queue text, p_now timestamp with time zone); Type: ACL; Schema: tickq; Owner: -
--

REVOKE ALL ON FUNCTION tickq.throughput(p_since timestamp with time zone, p_bucket_seconds integer, p_queue text, p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION tickq.throughput(p_since timestamp with time zone, p_bucket_seconds integer, p_queue text, p_now timestamp with time zone) TO tickq_operator;
GRANT ALL ON FUNCTION tickq.throughput(p_since timestamp with time zone, p_bucket_seconds integer, p_queue text, p_now timestamp with time zone) TO tickq_worker;


--
-- Name: TABLE job_dependencies; Type: ACL; Schema: tickq; Owner: -
--

GRANT SELECT,INSERT,DELETE ON TABLE tickq.job_dependencies TO tickq_worker;
GRANT SELECT,INSERT ON TABLE tickq.job_dependencies TO tickq_app;


--
-- Name: TABLE job_keys; Type: ACL; Schema: tickq; Owner: -
--

GRANT SELECT,INSERT,DELETE ON TABLE tickq.job_keys TO tickq_worker;
GRANT SELECT,INSERT ON TABLE tickq.job_keys TO tickq_app;


--
-- Name: TABLE job_signals; Type: ACL; Schema: tickq; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE tickq.job_signals TO tickq_worker;
GRANT SELECT,INSERT,DELETE ON TABLE tickq.job_signals TO tickq_app;


--
-- Name: TABLE job_steps; Type: ACL; Schema: tickq; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE tickq.job_steps TO tickq_worker;
GRANT SELECT,DELETE ON TABLE tickq.job_steps TO tickq_app;


--
-- Name: TABLE queue_depth_samples; Type: ACL; Schema: tickq; Owner: -
--

GRANT SELECT,INSERT,DELETE ON TABLE tickq.queue_depth_samples TO tickq_worker;


--
-- Name: TABLE queue_group_limits; Type: ACL; Schema: tickq; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE tickq.queue_group_limits TO tickq_worker;
GRANT SELECT ON TABLE tickq.queue_group_limits TO tickq_app;


--
-- Name: TABLE queue_limits; Type: ACL; Schema: tickq; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE tickq.queue_limits TO tickq_worker;
GRANT SELECT ON TABLE tickq.queue_limits TO tickq_app;


--
-- Name: TABLE queue_pauses; Type: ACL; Schema: tickq; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE tickq.queue_pauses TO tickq_worker;


--
-- Name: COLUMN queue_pauses.queue; Type: ACL; Schema: tickq; Owner: -
--

GRANT SELECT(queue) ON TABLE tickq.queue_pauses TO tickq_app;


--
-- Name: TABLE retention_policies; Type: ACL; Schema: tickq; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE tickq.retention_policies TO tickq_worker;


--
-- Name: TABLE schedules; Type: ACL; Schema: tickq; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE tickq.schedules TO tickq_worker;


--
-- Name: TABLE type_limits; Type: ACL; Schema: tickq; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE tickq.type_limits TO tickq_worker;
GRANT SELECT ON TABLE tickq.type_limits TO tickq_app;


--
-- PostgreSQL database dump complete
--

--
-- The versions a database at 0016b recorded.
--

INSERT INTO tickq.schema_migrations (version) VALUES
    ('0001_jobs'),
    ('0002_security'),
    ('0003_schedules'),
    ('0004_limits'),
    ('0005_retention'),
    ('0006_table_storage'),
    ('0007_api_role'),
    ('0008_steps'),
    ('0009_dependencies'),
    ('0010_fairness'),
    ('0011_console'),
    ('0012_force_dependencies_rls'),
    ('0013_job_keys'),
    ('0014_partitioned_jobs'),
    ('0014b_live_claims'),
    ('0015_app_guard_gate'),
    ('0016_live_id_statistics'),
    ('0016b_job_keys_by_key');
