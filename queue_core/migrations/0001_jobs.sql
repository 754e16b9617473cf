-- The queue: one table, one row per job.
create table tickq.jobs (
    id               uuid primary key default gen_random_uuid(),
    queue            text not null default 'default',
    type             text not null,
    user_id          uuid,
    status           text not null default 'queued',
    payload          jsonb not null default '{}'::jsonb,
    idempotency_key  text,
    attempts         integer not null default 0,
    max_attempts     integer not null default 3,
    priority         integer not null default 0,
    run_after        timestamptz not null default now(),
    lease_until      timestamptz,
    lease_token      uuid,
    progress         jsonb,
    result           jsonb,
    error            text,
    errors           jsonb not null default '[]'::jsonb,
    lease_seconds    integer,
    backoff_base     double precision not null default 1,
    backoff_factor   double precision not null default 2,
    backoff_max      double precision not null default 300,
    backoff_jitter   double precision not null default 0,
    cancel_requested boolean not null default false,
    created_at       timestamptz not null default now(),
    updated_at       timestamptz not null default now(),
    started_at       timestamptz,
    finished_at      timestamptz,

    constraint jobs_status_check check (
        status in ('queued', 'running', 'retrying', 'succeeded', 'dead', 'cancelled')),
    constraint jobs_payload_object check (jsonb_typeof(payload) = 'object'),
    constraint jobs_attempts_check check (attempts >= 0 and attempts <= max_attempts),
    constraint jobs_max_attempts_check check (max_attempts >= 1),
    -- A lease exists exactly while the job runs: no running job without one, no stale token.
    constraint jobs_lease_check check (
        (status = 'running') = (lease_token is not null and lease_until is not null)),
    constraint jobs_lease_seconds_check check (lease_seconds is null or lease_seconds > 0),
    constraint jobs_backoff_check check (
        backoff_base > 0 and backoff_factor >= 1 and backoff_max >= backoff_base
        and backoff_jitter between 0 and 1)
);

-- Idempotent enqueue: a key is taken while a job holding it is alive (queued, running,
-- retrying or succeeded) and free again once that job is dead or cancelled. Keys are scoped
-- to their owner so one user can neither collide with nor probe another user's keys.
create unique index jobs_idempotency_key_idx on tickq.jobs (idempotency_key, user_id)
    nulls not distinct
    where idempotency_key is not null and status not in ('dead', 'cancelled');

-- The claim: runnable rows only, in exactly the claim query's order, so a claim reads the
-- first N entries instead of sorting the backlog, and finished rows never enter the index.
create index jobs_claim_idx on tickq.jobs (queue, priority desc, run_after, created_at)
    where status in ('queued', 'retrying');

-- Reclaiming expired leases scans only running jobs by lease expiry.
create index jobs_lease_idx on tickq.jobs (lease_until) where status = 'running';

-- A user's job list, newest first, with keyset pagination on (created_at, id).
create index jobs_owner_idx on tickq.jobs (user_id, created_at desc, id desc)
    where user_id is not null;

-- Listing, filtering and retention of finished jobs (dead letters, pruning by age).
create index jobs_finished_idx on tickq.jobs (status, finished_at)
    where status in ('succeeded', 'dead', 'cancelled');

-- The last 20 failures of a job, oldest first: enough to debug, bounded in size.
create function tickq.error_history(history jsonb, entry jsonb) returns jsonb
    language sql immutable parallel safe
    as $$
    select case
        when jsonb_array_length(history) < 20 then history || jsonb_build_array(entry)
        else (select jsonb_agg(e order by i)
              from jsonb_array_elements(history || jsonb_build_array(entry))
                   with ordinality as a (e, i)
              where i > jsonb_array_length(history) + 1 - 20)
    end
$$;

-- backoff(attempt) = min(base * factor^(attempt-1), max), shortened by up to `jitter`.
-- The same formula as queue_core.backoff.Backoff.delay, for retries decided in SQL.
create function tickq.backoff_seconds(
    attempt integer, base double precision, factor double precision,
    max_delay double precision, jitter double precision) returns double precision
    language sql volatile parallel safe
    as $$
    select case when greatest(attempt - 1, 0) > 64 then max_delay
                else least(base * power(factor, greatest(attempt - 1, 0)), max_delay) end
           * (1 - jitter * random())
$$;
