-- Named statements of the Postgres store, loaded once at import (queue_core/queries.py).
-- Each starts with "-- name: <noun>_<verb>" and a line saying what it does.
-- Every statement that reads the time takes %(now)s and falls back to the database clock,
-- so production uses one clock (Lambda clocks drift) and tests pass an explicit instant.
-- {columns} is replaced at load time by the job column list (Job's field order).

-- name: jobs_enqueue
-- Insert a batch of jobs in one round trip; a live job holding a request's idempotency key
-- is returned instead, flagged as a duplicate.
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), input as materialized (
    select *
    from unnest(%(ids)s::uuid[], %(queues)s::text[], %(types)s::text[], %(user_ids)s::uuid[],
                %(payloads)s::text[], %(keys)s::text[], %(max_attempts)s::integer[],
                %(priorities)s::integer[], %(run_afters)s::timestamptz[],
                %(delays)s::float8[], %(lease_seconds)s::integer[],
                %(backoff_bases)s::float8[], %(backoff_factors)s::float8[],
                %(backoff_maxes)s::float8[], %(backoff_jitters)s::float8[])
        as i (id, queue, type, user_id, payload, idempotency_key, max_attempts, priority,
              run_after, delay, lease_seconds, backoff_base, backoff_factor, backoff_max,
              backoff_jitter)
), inserted as (
    insert into tickq.jobs as j (
        id, queue, type, user_id, payload, idempotency_key, max_attempts, priority,
        run_after, lease_seconds, backoff_base, backoff_factor, backoff_max, backoff_jitter,
        created_at, updated_at)
    select i.id, i.queue, i.type, i.user_id, i.payload::jsonb, i.idempotency_key,
           i.max_attempts, i.priority,
           coalesce(i.run_after, clock.now + i.delay * interval '1 second'),
           i.lease_seconds, i.backoff_base, i.backoff_factor, i.backoff_max, i.backoff_jitter,
           clock.now, clock.now
    from input i, clock
    -- The partial unique index decides duplicates, so concurrent enqueues of one key from
    -- many connections leave exactly one job: the losers wait for the winner, then skip.
    on conflict (idempotency_key, user_id)
        where idempotency_key is not null and status not in ('dead', 'cancelled')
        do nothing
    returning {columns}, false as duplicate
)
select * from inserted
union all
select {columns_j}, true as duplicate
from tickq.jobs j
join input i on j.idempotency_key = i.idempotency_key
            and j.user_id is not distinct from i.user_id
where i.idempotency_key is not null
  and j.status not in ('dead', 'cancelled')
  and not exists (select from inserted where inserted.id = i.id);

-- name: jobs_claim
-- Lease up to %(limit)s runnable jobs of one queue to one worker, best first.
with picked as materialized (
    -- MATERIALIZED and LIMIT inside the CTE: the lock is taken on exactly these rows
    -- (a bare "id in (select ... limit n for update skip locked)" can lock more than n,
    -- PostgreSQL bug #15715). SKIP LOCKED lets concurrent claimers pass each other's rows
    -- instead of queueing behind them. "queue = <one value>" lets jobs_claim_idx deliver
    -- rows already in claim order, so the claim reads N index entries instead of sorting
    -- the backlog.
    select id
    from tickq.jobs
    where status in ('queued', 'retrying')
      and queue = %(queue)s
      and run_after <= coalesce(%(now)s::timestamptz, now())
    order by priority desc, run_after, created_at
    limit %(limit)s
    for update skip locked
)
update tickq.jobs j
set status = 'running',
    attempts = j.attempts + 1,
    lease_token = gen_random_uuid(),
    lease_until = coalesce(%(now)s::timestamptz, now())
                  + coalesce(j.lease_seconds, %(lease_seconds)s) * interval '1 second',
    started_at = coalesce(%(now)s::timestamptz, now()),
    updated_at = coalesce(%(now)s::timestamptz, now())
-- An id array probes the primary key per row whatever the table's statistics say.
where j.id = any(array(select id from picked))
returning {columns_j};

-- name: jobs_claim_queues
-- Lease up to %(limit)s runnable jobs from any of several queues, best first across them.
with picked as materialized (
    -- Same locking as jobs_claim; with several queues the backlog is sorted, not walked.
    select id
    from tickq.jobs
    where status in ('queued', 'retrying')
      and queue = any(%(queues)s::text[])
      and run_after <= coalesce(%(now)s::timestamptz, now())
    order by priority desc, run_after, created_at
    limit %(limit)s
    for update skip locked
)
update tickq.jobs j
set status = 'running',
    attempts = j.attempts + 1,
    lease_token = gen_random_uuid(),
    lease_until = coalesce(%(now)s::timestamptz, now())
                  + coalesce(j.lease_seconds, %(lease_seconds)s) * interval '1 second',
    started_at = coalesce(%(now)s::timestamptz, now()),
    updated_at = coalesce(%(now)s::timestamptz, now())
where j.id = any(array(select id from picked))
returning {columns_j};

-- name: jobs_finish
-- Persist the outcomes of a batch of attempts; only rows still leased under the given token
-- change, so a worker that lost its lease cannot overwrite a newer attempt.
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), outcome as (
    select *
    from jsonb_to_recordset(%(outcomes)s::jsonb)
        as o (id uuid, lease_token uuid, status text, result jsonb, error text,
              delay float8, extra_attempt boolean)
)
update tickq.jobs j
set status = o.status,
    result = coalesce(o.result, j.result),
    error = coalesce(o.error, j.error),
    errors = case when o.error is null then j.errors
                  else tickq.error_history(j.errors, jsonb_build_object(
                      'attempt', j.attempts, 'at', clock.now, 'error', o.error)) end,
    run_after = case when o.status in ('queued', 'retrying')
                     then clock.now + o.delay * interval '1 second' else j.run_after end,
    max_attempts = j.max_attempts + case when o.extra_attempt then 1 else 0 end,
    lease_until = null,
    lease_token = null,
    cancel_requested = false,
    updated_at = clock.now,
    finished_at = case when o.status in ('succeeded', 'dead', 'cancelled')
                       then clock.now end
from outcome o, clock
where j.id = o.id
  and j.id = any(array(select id from outcome))
  and j.lease_token = o.lease_token
  and j.status = 'running'
returning j.id, j.status;

-- name: jobs_reclaim
-- Return jobs whose lease expired to retrying (a failed attempt, with backoff), or to dead
-- when their attempts are used up, checking and writing in one statement.
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), expired as materialized (
    -- SKIP LOCKED: a row locked right now is being finished by its worker; leave it to them.
    select id
    from tickq.jobs, clock
    where status = 'running' and lease_until <= clock.now
    order by lease_until
    limit %(limit)s
    for update of jobs skip locked
), decided as (
    select j.id,
           case when j.cancel_requested then 'cancelled'
                when j.attempts >= j.max_attempts then 'dead'
                else 'retrying' end as status,
           case when j.cancel_requested then 'cancelled while running'
                else 'lease expired' end as error
    from tickq.jobs j join expired using (id)
)
update tickq.jobs j
set status = d.status,
    error = d.error,
    errors = tickq.error_history(j.errors, jsonb_build_object(
        'attempt', j.attempts, 'at', clock.now, 'error', d.error)),
    run_after = case when d.status = 'retrying'
                     then clock.now + tickq.backoff_seconds(
                         j.attempts, j.backoff_base, j.backoff_factor, j.backoff_max,
                         j.backoff_jitter) * interval '1 second'
                     else j.run_after end,
    lease_until = null,
    lease_token = null,
    cancel_requested = false,
    updated_at = clock.now,
    finished_at = case when d.status <> 'retrying' then clock.now end
from decided d, clock
where j.id = d.id
returning {columns_j};

-- name: jobs_extend_lease
-- Push a running job's lease out; fenced by its lease token.
update tickq.jobs
set lease_until = coalesce(%(now)s::timestamptz, now()) + %(seconds)s * interval '1 second',
    updated_at = coalesce(%(now)s::timestamptz, now())
where id = %(id)s and lease_token = %(lease_token)s and status = 'running'
returning lease_until, cancel_requested;

-- name: jobs_report_progress
-- Record a running job's progress; fenced by its lease token.
update tickq.jobs
set progress = %(progress)s::jsonb,
    updated_at = coalesce(%(now)s::timestamptz, now())
where id = %(id)s and lease_token = %(lease_token)s and status = 'running'
returning cancel_requested;

-- name: jobs_get
-- One job by id (row-level security hides other users' jobs).
select {columns} from tickq.jobs where id = %(id)s;

-- name: jobs_list
-- Jobs matching optional filters, newest first, a page after the (created_at, id) cursor.
select {columns}
from tickq.jobs
where (%(statuses)s::text[] is null or status = any(%(statuses)s::text[]))
  and (%(types)s::text[] is null or type = any(%(types)s::text[]))
  and (%(queues)s::text[] is null or queue = any(%(queues)s::text[]))
  and (%(user_id)s::uuid is null or user_id = %(user_id)s::uuid)
  and (%(after_created)s::timestamptz is null
       or (created_at, id) < (%(after_created)s::timestamptz, %(after_id)s::uuid))
order by created_at desc, id desc
limit %(limit)s;

-- name: jobs_cancel
-- Cancel waiting jobs at once and ask running ones to stop at their next heartbeat.
update tickq.jobs
set status = case when status = 'running' then status else 'cancelled' end,
    cancel_requested = (status = 'running'),
    finished_at = case when status = 'running' then null
                       else coalesce(%(now)s::timestamptz, now()) end,
    updated_at = coalesce(%(now)s::timestamptz, now())
where id = any(%(ids)s::uuid[]) and status in ('queued', 'retrying', 'running')
returning {columns};

-- name: jobs_retry
-- Send dead (or, by id, cancelled) jobs back to the queue with fresh attempts. A job whose
-- idempotency key a live job has taken meanwhile is skipped, and so is all but the newest
-- of several finished jobs sharing one key, since the key can be live only once.
with candidates as (
    select id, idempotency_key, user_id, finished_at
    from tickq.jobs
    where status = any(%(statuses)s::text[])
      and (%(ids)s::uuid[] is null or id = any(%(ids)s::uuid[]))
      and (%(types)s::text[] is null or type = any(%(types)s::text[]))
      and (%(queues)s::text[] is null or queue = any(%(queues)s::text[]))
    order by finished_at
    limit %(limit)s
    for update skip locked
), chosen as (
    select id from candidates c
    where c.idempotency_key is null
       or (not exists (select from tickq.jobs o
                       where o.idempotency_key = c.idempotency_key
                         and o.user_id is not distinct from c.user_id
                         and o.status not in ('dead', 'cancelled'))
           and not exists (select from candidates n
                           where n.idempotency_key = c.idempotency_key
                             and n.user_id is not distinct from c.user_id
                             and (n.finished_at, n.id) > (c.finished_at, c.id)))
)
update tickq.jobs j
set status = 'queued',
    attempts = 0,
    run_after = coalesce(%(now)s::timestamptz, now()),
    cancel_requested = false,
    finished_at = null,
    updated_at = coalesce(%(now)s::timestamptz, now())
from chosen
where j.id = chosen.id
returning {columns_j};

-- name: jobs_stats
-- Counts per queue, type and status, and the age of the oldest runnable job of each.
select queue, type, status, count(*) as count,
       extract(epoch from coalesce(%(now)s::timestamptz, now())
               - min(run_after) filter (
                   where status in ('queued', 'retrying')
                     and run_after <= coalesce(%(now)s::timestamptz, now())))
           as oldest_runnable_seconds
from tickq.jobs
group by queue, type, status
order by queue, type, status;

-- name: role_worker
-- Act as tickq_worker until this transaction ends (operator views read every user's jobs).
set local role tickq_worker;

-- name: clock_now
-- The database clock, for shells that must agree with the store on "now".
select now();

-- name: user_scope
-- Name the user whose rows this transaction may see (row-level security); local to it.
select set_config('tickq.user_id', %(user_id)s, true);
