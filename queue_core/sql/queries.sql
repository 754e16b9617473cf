-- Named statements of the Postgres store, loaded once at import (queue_core/queries.py).
-- Each starts with "-- name: <noun>_<verb>" and a line saying what it does.
-- Every statement that reads the time takes %(now)s and falls back to the database clock,
-- so production uses one clock (Lambda clocks drift) and tests pass an explicit instant.
-- Statements that return jobs list the job columns by name; the store maps rows by name.

-- name: jobs_enqueue
-- Insert a batch of jobs in one round trip. Returns only the ids of the requests that did
-- not insert, as their key is held (reading back every row would cost more than the
-- insert); the store then reads the holders with jobs_key_holders. Reading them here cost
-- every keyed batch a tenth of its time, though most batches have no duplicate: a join into
-- every partition of tickq.jobs is set up on each run, even when it reads nothing. Each column comes either as an array (each_<column>)
-- or, when the whole batch shares one value, as a scalar (all_<column>) with a null array:
-- a batch of one job type sends two arrays (ids, keys) instead of fifteen. Arrays go in
-- binary, which the driver dumps several times faster than text. A batch without keys goes
-- through jobs_enqueue_unkeyed instead.
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), input as materialized (
    select i.*,
           coalesce(i.idempotency_key, %(all_idempotency_key)s::text) as key,
           coalesce(i.user_id, %(all_user_id)s::uuid) as owner
    from unnest(%(each_id)b::uuid[], %(each_queue)b::text[], %(each_type)b::text[],
                %(each_user_id)b::uuid[], %(each_payload)b::text[],
                %(each_idempotency_key)b::text[], %(each_max_attempts)b::integer[],
                %(each_priority)b::integer[], %(each_run_after)b::timestamptz[],
                %(each_delay)b::float8[], %(each_lease_seconds)b::integer[],
                %(each_timeout_seconds)b::integer[],
                %(each_backoff_base)b::float8[], %(each_backoff_factor)b::float8[],
                %(each_backoff_max)b::float8[], %(each_backoff_jitter)b::float8[],
                %(each_group_key)b::text[], %(each_flow_keys)b::text[])
        as i (id, queue, type, user_id, payload, idempotency_key, max_attempts, priority,
              run_after, delay, lease_seconds, timeout_seconds, backoff_base, backoff_factor,
              backoff_max, backoff_jitter, group_key, flow_keys)
), claimed as (
    -- The key table decides duplicates (tickq.job_keys), so concurrent enqueues of one key
    -- from many connections leave exactly one job: the losers wait for the winner, then
    -- skip. Keys are claimed in one global order: two batches that share uncommitted keys
    -- then wait on each other in the same order instead of each holding a key the other
    -- needs (a deadlock when callers enqueue batches inside their own transactions).
    -- Taken here rather than by the insert's key trigger (jobs_key_insert), which fails the
    -- statement on a held key: the trigger then finds each key held by its job.
    insert into tickq.job_keys as k (idempotency_key, user_id, job_id)
    select i.key, i.owner, i.id
    from input i
    where i.key is not null
    order by i.key, i.owner
    on conflict (idempotency_key, user_id) do nothing
    returning k.job_id
), inserted as (
    -- Only the jobs whose key this statement won, and the keyless ones.
    insert into tickq.jobs as j (
        id, queue, type, user_id, payload, idempotency_key, max_attempts, priority,
        run_after, lease_seconds, timeout_seconds, backoff_base, backoff_factor, backoff_max,
        backoff_jitter, group_key, flow_keys, created_at, updated_at)
    select i.id,
           coalesce(i.queue, %(all_queue)s::text),
           coalesce(i.type, %(all_type)s::text),
           i.owner,
           coalesce(i.payload, %(all_payload)s::text)::jsonb,
           i.key,
           coalesce(i.max_attempts, %(all_max_attempts)s::integer),
           coalesce(i.priority, %(all_priority)s::integer),
           coalesce(i.run_after, %(all_run_after)s::timestamptz,
                    clock.now + coalesce(i.delay, %(all_delay)s::float8) * interval '1 second'),
           coalesce(i.lease_seconds, %(all_lease_seconds)s::integer),
           coalesce(i.timeout_seconds, %(all_timeout_seconds)s::integer),
           coalesce(i.backoff_base, %(all_backoff_base)s::float8),
           coalesce(i.backoff_factor, %(all_backoff_factor)s::float8),
           coalesce(i.backoff_max, %(all_backoff_max)s::float8),
           coalesce(i.backoff_jitter, %(all_backoff_jitter)s::float8),
           coalesce(i.group_key, %(all_group_key)s::text),
           -- A job's keys as one text, space-separated (a space is no key's character):
           -- an array of arrays must be rectangular.
           string_to_array(coalesce(i.flow_keys, %(all_flow_keys)s::text), ' '),
           clock.now, clock.now
    from input i, clock
    where i.key is null or i.id in (select c.job_id from claimed c)
    returning j.id
)
select i.id
from input i
where not exists (select from inserted where inserted.id = i.id);

-- name: jobs_traceparents
-- The trace contexts recorded on running jobs, for the runner's consumer spans. Names the
-- live partition's statuses, so it reads jobs_live alone.
select id, traceparent from tickq.jobs
where id = any(%(ids)s::uuid[]) and traceparent is not null
  and status in ('waiting', 'queued', 'running', 'retrying');

-- name: jobs_key_holders
-- The jobs holding the given idempotency keys, each (key, owner) pair a request of
-- jobs_enqueue that lost its key: the key, its owner, the holder's id and status. A pair
-- whose holder is not visible yet, or let go of the key meanwhile, has no row; the store
-- sends that request again.
select k.idempotency_key, k.user_id, j.id, j.status
from unnest(%(keys)s::text[], %(owners)s::uuid[]) as r (key, owner)
join tickq.job_keys k on k.idempotency_key = r.key and k.user_id is not distinct from r.owner
join tickq.jobs j on j.id = k.job_id;

-- name: jobs_enqueue_unkeyed
-- jobs_enqueue for a batch without idempotency keys: nothing can conflict, so the jobs go
-- straight in, and the key table is never touched. Same parameters as jobs_enqueue; returns
-- nothing, as every job inserts.
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
)
insert into tickq.jobs as j (
    id, queue, type, user_id, payload, max_attempts, priority,
    run_after, lease_seconds, timeout_seconds, backoff_base, backoff_factor, backoff_max,
    backoff_jitter, group_key, flow_keys, created_at, updated_at)
select i.id,
       coalesce(i.queue, %(all_queue)s::text),
       coalesce(i.type, %(all_type)s::text),
       coalesce(i.user_id, %(all_user_id)s::uuid),
       coalesce(i.payload, %(all_payload)s::text)::jsonb,
       coalesce(i.max_attempts, %(all_max_attempts)s::integer),
       coalesce(i.priority, %(all_priority)s::integer),
       coalesce(i.run_after, %(all_run_after)s::timestamptz,
                clock.now + coalesce(i.delay, %(all_delay)s::float8) * interval '1 second'),
       coalesce(i.lease_seconds, %(all_lease_seconds)s::integer),
       coalesce(i.timeout_seconds, %(all_timeout_seconds)s::integer),
       coalesce(i.backoff_base, %(all_backoff_base)s::float8),
       coalesce(i.backoff_factor, %(all_backoff_factor)s::float8),
       coalesce(i.backoff_max, %(all_backoff_max)s::float8),
       coalesce(i.backoff_jitter, %(all_backoff_jitter)s::float8),
       coalesce(i.group_key, %(all_group_key)s::text),
       string_to_array(coalesce(i.flow_keys, %(all_flow_keys)s::text), ' '),
       clock.now, clock.now
from unnest(%(each_id)b::uuid[], %(each_queue)b::text[], %(each_type)b::text[],
            %(each_user_id)b::uuid[], %(each_payload)b::text[],
            %(each_max_attempts)b::integer[],
            %(each_priority)b::integer[], %(each_run_after)b::timestamptz[],
            %(each_delay)b::float8[], %(each_lease_seconds)b::integer[],
                %(each_timeout_seconds)b::integer[],
            %(each_backoff_base)b::float8[], %(each_backoff_factor)b::float8[],
            %(each_backoff_max)b::float8[], %(each_backoff_jitter)b::float8[],
            %(each_group_key)b::text[], %(each_flow_keys)b::text[])
    as i (id, queue, type, user_id, payload, max_attempts, priority,
          run_after, delay, lease_seconds, timeout_seconds, backoff_base, backoff_factor,
          backoff_max, backoff_jitter, group_key, flow_keys),
    clock;

-- name: jobs_enqueue_one
-- jobs_enqueue for exactly one keyed job, returning its whole row (a single enqueue shows
-- it), with plain parameters: unpacking one-element arrays through a materialized CTE cost
-- half of a single enqueue. Returns nothing when the key is held: the store then reads the
-- holder with jobs_key_holder. Reading it here cost every new keyed job a fifth of its time
-- (a join into every partition of tickq.jobs, set up on each run even when not executed).
with claimed as (
    -- Same arbiter as jobs_enqueue: the key table decides duplicates.
    insert into tickq.job_keys (idempotency_key, user_id, job_id)
    values (%(key)s::text, %(user_id)s::uuid, %(id)s::uuid)
    on conflict (idempotency_key, user_id) do nothing
    returning job_id
), inserted as (
    insert into tickq.jobs as j (
        id, queue, type, user_id, payload, idempotency_key, max_attempts, priority,
        run_after, lease_seconds, timeout_seconds, backoff_base, backoff_factor, backoff_max,
        backoff_jitter, group_key, flow_keys, created_at, updated_at)
    select %(id)s::uuid, %(queue)s, %(type)s, %(user_id)s::uuid, %(payload)s::jsonb,
           %(key)s::text, %(max_attempts)s::integer, %(priority)s::integer,
           coalesce(%(run_after)s::timestamptz,
                    coalesce(%(now)s::timestamptz, now())
                    + %(delay)s::float8 * interval '1 second'),
           %(lease_seconds)s::integer, %(timeout_seconds)s::integer, %(backoff_base)s::float8,
           %(backoff_factor)s::float8,
           %(backoff_max)s::float8, %(backoff_jitter)s::float8, %(group_key)s::text,
           %(flow_keys)s::text[],
           coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now())
    where exists (select from claimed)
    returning id, queue, type, user_id, status, payload, idempotency_key, attempts, max_attempts,
        priority, run_after, lease_until, lease_token, progress, result, error, errors,
        lease_seconds, backoff_base, backoff_factor, backoff_max, backoff_jitter,
        cancel_requested, created_at, updated_at, started_at, finished_at, group_key, has_children,
        owner_priority, snoozes, timeout_seconds, wait_kind, flow_keys, false as duplicate
)
select * from inserted;

-- name: jobs_key_holder
-- The job holding an idempotency key (a live or succeeded job), as a duplicate: read after
-- jobs_enqueue_one lost the key. Nothing when the holder is not visible yet or let go of
-- the key meanwhile; the store then enqueues again.
select j.id, j.queue, j.type, j.user_id, j.status, j.payload, j.idempotency_key, j.attempts,
    j.max_attempts, j.priority, j.run_after, j.lease_until, j.lease_token, j.progress,
    j.result, j.error, j.errors, j.lease_seconds, j.backoff_base, j.backoff_factor,
    j.backoff_max, j.backoff_jitter, j.cancel_requested, j.created_at, j.updated_at,
    j.started_at, j.finished_at, j.group_key, j.has_children, j.owner_priority, j.snoozes,
    j.timeout_seconds, j.wait_kind, j.flow_keys, true as duplicate
from tickq.job_keys k
join tickq.jobs j on j.id = k.job_id
where k.idempotency_key = %(key)s::text
  and k.user_id is not distinct from %(user_id)s::uuid;

-- name: jobs_enqueue_one_unkeyed
-- jobs_enqueue_one for a job without an idempotency key: nothing can conflict (keyless jobs
-- hold no row of tickq.job_keys), and skipping the duplicate lookup halves the statement.
-- Returns only what the request does not already tell (the stored payload, the database
-- clock's times, and the level and group an application user's job is stored with, which
-- tickq.jobs_app_own moves): reading back all the columns cost more client time than the
-- insert.
insert into tickq.jobs (
    id, queue, type, user_id, payload, idempotency_key, max_attempts, priority,
    run_after, lease_seconds, timeout_seconds, backoff_base, backoff_factor, backoff_max,
    backoff_jitter, group_key, flow_keys, created_at, updated_at)
values (%(id)s, %(queue)s, %(type)s, %(user_id)s::uuid, %(payload)s::jsonb,
        null, %(max_attempts)s, %(priority)s,
        coalesce(%(run_after)s::timestamptz,
                 coalesce(%(now)s::timestamptz, now())
                 + %(delay)s::float8 * interval '1 second'),
        %(lease_seconds)s::integer, %(timeout_seconds)s::integer, %(backoff_base)s,
        %(backoff_factor)s,
        %(backoff_max)s, %(backoff_jitter)s, %(group_key)s::text, %(flow_keys)s::text[],
        coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()))
returning payload, run_after, created_at, priority, group_key;

-- name: jobs_gate
-- Which job a debounced or throttled enqueue lands on (tickq.job_gate): the job's id, the
-- outcome (created: insert it, with run_after when not null; debounced; throttled).
select g.job_id, g.outcome, g.run_after
from tickq.job_gate(%(kind)s, %(key)s, %(user_id)s::uuid, %(seconds)s::float8,
                    %(max_seconds)s::float8, %(payload)s::jsonb, %(now)s::timestamptz,
                    %(id)s::uuid) g;

-- name: jobs_enqueue_many
-- An application user's enqueue (tickq.enqueue_many, the application login's only way to
-- add jobs): the requests as a JSON array, the owner the transaction's user, the clock and
-- the ids the database's. One row per request, in order: its job's id and status, and the
-- outcome (created, duplicate, debounced, throttled).
select e.request, e.id, e.status, e.outcome from tickq.enqueue_many(%(jobs)s::jsonb) e;

-- name: job_gate_of
-- A job's gate, for its views: the kind, the key, the enqueues that landed on it.
select kind, gate_key, enqueues, first_at from tickq.job_gates where job_id = %(id)s;

-- The claim statements are composed of the parts below ("-- part: <name>", spliced in
-- where a statement says {{name}}, by queue_core/queries.py when it loads this file), so
-- each rule of the finish and the claim is written once: the finish (persisting a batch's
-- outcomes) here, the pick of the plain claim here, the lease of every claim in
-- tickq.jobs_lease (queue_core/schema/functions/jobs_lease.sql), which the limited and fair
-- claims (tickq.claim_limited, tickq.claim_fair) call too.

-- part: finish
-- Persist a batch's outcomes: the first CTEs of every statement that finishes and claims
-- (jobs_finish_and_claim, jobs_finish_and_claim_queues, jobs_finish_and_claim_fair), which
-- then add their claimed CTE and end with finish_report.
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), outcome as (
    select *
    from jsonb_to_recordset(%(outcomes)s::jsonb)
        as o (id uuid, lease_token uuid, status text, result jsonb, error text,
              delay float8, extra_attempt boolean, event jsonb, batch_id uuid)
    -- Plain successes (no result, no error, no event, no batch), the bulk of any batch, come
    -- as two binary uuid arrays: spelling each as JSON text cost more client time than its
    -- update.
    union all
    select s.id, s.lease_token, 'succeeded', null, null, null, null, null, null
    from unnest(%(succeeded_ids)b::uuid[], %(succeeded_tokens)b::uuid[])
        as s (id, lease_token)
), finished as (
    -- Only rows still leased under the given token change, so a worker that lost its
    -- lease cannot overwrite a newer attempt.
    update tickq.jobs j
    set status = o.status,
        result = coalesce(o.result, j.result),
        error = coalesce(o.error, j.error),
        errors = case when o.error is null then j.errors
                      else tickq.error_history(j.errors, jsonb_build_object(
                          'attempt', j.attempts, 'at', clock.now, 'error', o.error)) end,
        run_after = case when o.status in ('queued', 'retrying')
                         then clock.now + o.delay * interval '1 second' else j.run_after end,
        -- A snooze gives back the attempt its claim counted and is counted as a snooze:
        -- max_attempts stays as declared.
        attempts = j.attempts - case when o.extra_attempt then 1 else 0 end,
        snoozes = j.snoozes + case when o.extra_attempt then 1 else 0 end,
        lease_until = null,
        lease_token = null,
        cancel_requested = false,
        -- The batch handler call the attempt ran in: only a batch handler's outcomes name
        -- one (as JSON); every other keeps the job's value, null for a plain job.
        batch_id = coalesce(o.batch_id, j.batch_id),
        updated_at = clock.now,
        finished_at = case when o.status in ('succeeded', 'dead', 'cancelled')
                           then clock.now end
    from outcome o, clock
    where j.id = o.id
      and j.id = any(array(select id from outcome))
      -- The lease token is only ever set on a running job (jobs_lease_check), so the
      -- status is named as the live partition's list, not as 'running': that constant
      -- reads jobs_live alone (partition pruning needs a constant), and does not match the
      -- predicate of jobs_lease_idx, which the planner would otherwise AND with the id
      -- index, walking every entry finished jobs left in it until VACUUM (15,000 entries
      -- cost a finish of 10 jobs 0.33 ms, as much as the rest of it).
      and j.lease_token = o.lease_token
      and j.status in ('waiting', 'queued', 'running', 'retrying')
    returning j.id, j.status, j.has_children
), evented as (
    -- The lifecycle events that the finished jobs' types opted into (the runner puts them
    -- on their outcomes; `Job Dead` is the trigger jobs_outbox_dead's), in the outbox in
    -- this transaction, only for jobs whose lease held. A batch without one tests a null
    -- per outcome: the lookup among the finished runs only for an outcome that has one.
    insert into tickq.outbox (job_id, user_id, detail_type, detail)
    select o.id, (o.event->>'user_id')::uuid, o.event->>'detail_type', o.event->'detail'
    from outcome o
    where o.event is not null and o.id in (select id from finished)
)

-- part: finish_report
-- The last part of a statement that finishes and claims: the ids of its finished CTE whose
-- lease held, then its claimed CTE's jobs.
-- The ids come on the first row only: repeated on every row they cost more to parse than
-- the jobs themselves.
select case when row_number() over () = 1 then f.ids end as ids, c.*
from (select array_agg(id) as ids,
             -- Children of the jobs finished above are released or cancelled in this
             -- statement's transaction, by a function called only when a finished
             -- job has some (has_children): a batch of plain jobs pays a boolean per job,
             -- no lookup. Computed in the pass that collects the ids: a CTE of its own cost
             -- a measurable part of a plain drain.
             case when bool_or(has_children) then tickq.jobs_settle(
                 array_agg(id) filter (where has_children),
                 array_agg(status) filter (where has_children),
                 (select now from clock)) end as children
      from finished) f
left join claimed c on true

-- part: job_columns
-- The job columns of a claim's rows, by name (the store maps rows by name).
id, queue, type, user_id, status, payload, idempotency_key, attempts, max_attempts,
    priority, run_after, lease_until, lease_token, progress, result, error, errors,
    lease_seconds, backoff_base, backoff_factor, backoff_max, backoff_jitter,
    cancel_requested, created_at, updated_at, started_at, finished_at, group_key, has_children,
    owner_priority, snoozes, timeout_seconds, wait_kind, flow_keys

-- part: pick_runnable
-- The plain claim's pick, but for its queue condition (each statement adds its own, and
-- closes it with pick_in_claim_order). MATERIALIZED and LIMIT inside the CTE: the lock is
-- taken on exactly these rows (a bare "id in (select ... limit n for update skip locked)"
-- can lock more than n, PostgreSQL bug #15715). SKIP LOCKED lets concurrent claimers pass
-- each other's rows instead of queueing behind them. Rows finished above still read as
-- running in this statement's snapshot, so a job is never finished and claimed again by
-- one statement.
picked as materialized (
    select id
    from tickq.jobs
    where status in ('queued', 'retrying')
      and run_after <= coalesce(%(now)s::timestamptz, now())

-- part: pick_in_claim_order
-- The end of pick_runnable: best first, at most %(limit)s, each row locked. This order and
-- pick_runnable's condition are the claim's rules: tests/unit/test_claim_order_shared.py
-- holds the limited and fair claims' functions, the claim indexes and the Python batch
-- order to them.
    order by priority desc, owner_priority desc, run_after, created_at
    limit %(limit)s
    for update skip locked
)

-- part: lease_picked
-- The picked jobs leased (tickq.jobs_lease, the lease rule of every claim) at the
-- statement's clock, their tokens derived from %(seed)s, the 16 random bytes the worker
-- drew for this statement, read as a uuid (bytes, not a uuid, because the driver sends
-- them as they are, where a uuid costs the client a conversion per batch; null: one drawn
-- by the database). MATERIALIZED: the lease runs once, whatever the plan.
claimed as materialized (
    select {{job_columns}}
    from tickq.jobs_lease(array(select id from picked), %(lease_seconds)s,
                          (select now from clock), encode(%(seed)s::bytea, 'hex')::uuid)
)

-- name: jobs_finish_and_claim
-- Persist a batch's outcomes and lease the next batch in one statement, so a busy worker
-- pays one round trip and one commit (one WAL flush) per batch instead of two. Finishing
-- alone is %(limit)s = 0; claiming alone is an empty outcome list. Returns the ids whose
-- lease held (first row), then the claimed jobs (one all-null job when none was claimed).
-- "queue = <one value>" lets jobs_claim_idx deliver rows already in claim order, so the
-- claim reads N index entries instead of sorting the backlog.
{{finish}}, {{pick_runnable}}
      and queue = %(queue)s
{{pick_in_claim_order}}, {{lease_picked}}
{{finish_report}};

-- name: jobs_finish_and_claim_queues
-- jobs_finish_and_claim for a worker of several queues: the backlog is sorted rather than
-- walked in index order.
{{finish}}, {{pick_runnable}}
      and queue = any(%(queues)s::text[])
{{pick_in_claim_order}}, {{lease_picked}}
{{finish_report}};

-- name: jobs_finish_and_claim_flow
-- jobs_finish_and_claim while any flow limit or hold exists: the pick is tickq.claim_flow's,
-- which looks past blocked keys and keeps each key within its limits. Same parameters and
-- rows as jobs_finish_and_claim (queues as a list).
{{finish}}, claimed as (
    select {{job_columns}}
    from tickq.claim_flow(%(queues)s::text[], %(limit)s, %(lease_seconds)s,
                          %(now)s::timestamptz, encode(%(seed)s::bytea, 'hex')::uuid)
)
{{finish_report}};

-- name: jobs_claim_recover
-- The jobs that claim statements of this worker leased but whose replies it never read
-- (the connection died first), found again by the seeds the worker drew for them
-- (%(seeds)s, 16 bytes each, as lease_picked takes them): a job still running under the
-- token tickq.jobs_lease derived from one of them, sha256(seed, id), is this worker's, and comes back as claimed, its lease renewed
-- and its attempts unchanged (no handler ran it). A job reclaimed meanwhile, or leased
-- again by another worker, holds another token and does not match. The running jobs are
-- few and live in tickq.jobs_live ('running' prunes to it): they are read whole, through
-- jobs_lease_idx, rather than looked up by a token the index does not hold.
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
)
update tickq.jobs j
set lease_until = clock.now
        + coalesce(j.lease_seconds, %(lease_seconds)s) * interval '1 second',
    updated_at = clock.now
from clock, (select encode(b, 'hex')::uuid as seed from unnest(%(seeds)s::bytea[]) b) s
where j.status = 'running'
  and j.lease_token = tickq.lease_token(s.seed, j.id)
returning {{job_columns}};

-- name: job_complete_in_mark
-- The first half of a completion inside the caller's transaction: mark the running job as
-- completed in it, fenced by its lease token. The update also locks the row until that
-- transaction ends, so no reclaim slips between this check and the finish that follows
-- (jobs_finish_and_claim with limit 0, the one finish rule). No row: the lease was lost.
update tickq.jobs
set completed_in_transaction = true
where id = %(id)s
  and lease_token = %(lease_token)s
  and status in ('waiting', 'queued', 'running', 'retrying')
returning id;

-- name: jobs_reclaim
-- Return jobs whose lease expired to retrying (a failed attempt, with backoff), or to dead
-- when their attempts are used up, checking and writing in one statement. A saga it would
-- end with undos owed is sent back at once with its compensation recorded instead.
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), expired as materialized (
    -- SKIP LOCKED: a row locked right now is being finished by its worker; leave it to them.
    -- What decides the job's fate is read here, from the row as locked: a cancel that
    -- committed after this statement began is in it, where another read of tickq.jobs (the
    -- statement's snapshot) would miss it and retry a job asked to cancel.
    select id, cancel_requested, attempts, max_attempts
    from tickq.jobs, clock
    where status = 'running' and lease_until <= clock.now
    order by lease_until
    limit %(limit)s
    for update of jobs skip locked
), owed as materialized (
    -- A job this reclaim would end (asked to cancel, or its last attempt) that owes undos
    -- (tickq.job_compensation_spare: null when its compensation has begun already). Only
    -- those are looked up: a job with attempts left pays one comparison.
    select j.id, j.cancel_requested, j.attempts, j.max_attempts,
           case when j.cancel_requested or j.attempts >= j.max_attempts
                then tickq.job_compensation_spare(j.id) else 0 end as spare
    from expired j
), decided as (
    -- A saga that owes undos goes back to run them at once (its handler compensates, then
    -- it ends as it was to end here); a compensating one's cancel is its compensation's.
    select o.id, o.spare,
           case when o.spare > 0 then 'retrying'
                when o.cancel_requested and o.spare is not null then 'cancelled'
                when o.attempts >= o.max_attempts then 'dead'
                else 'retrying' end as status,
           case when o.cancel_requested and o.spare is not null then 'cancelled while running'
                else 'lease expired' end as error,
           case when o.cancel_requested then 'cancelled' else 'dead' end as ends
    from owed o
), reclaimed as (
    update tickq.jobs j
    set status = d.status,
        error = d.error,
        errors = tickq.error_history(j.errors, jsonb_build_object(
            'attempt', j.attempts, 'at', clock.now, 'error', d.error)),
        run_after = case when d.spare > 0 then clock.now
                         when d.status = 'retrying'
                         then clock.now + tickq.backoff_seconds(
                             j.attempts, j.backoff_base, j.backoff_factor, j.backoff_max,
                             j.backoff_jitter) * interval '1 second'
                         else j.run_after end,
        max_attempts = case when d.spare > 0 then greatest(j.max_attempts, j.attempts + d.spare)
                            else j.max_attempts end,
        lease_until = null,
        lease_token = null,
        cancel_requested = false,
        updated_at = clock.now,
        finished_at = case when d.status <> 'retrying' then clock.now end
    from decided d, clock
    where j.id = d.id and j.status in ('waiting', 'queued', 'running', 'retrying')
    returning j.id, j.queue, j.type, j.user_id, j.status, j.payload, j.idempotency_key,
        j.attempts, j.max_attempts, j.priority, j.run_after, j.lease_until, j.lease_token,
        j.progress, j.result, j.error, j.errors, j.lease_seconds, j.backoff_base,
        j.backoff_factor, j.backoff_max, j.backoff_jitter, j.cancel_requested, j.created_at,
        j.updated_at, j.started_at, j.finished_at, j.group_key, j.has_children, j.owner_priority,
        j.snoozes, j.timeout_seconds, j.wait_kind, j.flow_keys
), begun as (
    select case when count(*) > 0
                then tickq.job_compensations_record(array_agg(d.id), array_agg(d.ends),
                                                    array_agg(d.error), min(clock.now))
           end as compensations
    from decided d, clock
    where d.spare > 0
), settled as (
    -- A job that went dead or cancelled here takes its waiting descendants with it.
    select case when count(*) > 0
                then tickq.jobs_settle(array_agg(r.id), array_agg(r.status), min(clock.now))
           end as children
    from reclaimed r, clock
    where r.has_children and r.status <> 'retrying'
)
select id, queue, type, user_id, status, payload, idempotency_key, attempts, max_attempts,
    priority, run_after, lease_until, lease_token, progress, result, error, errors,
    lease_seconds, backoff_base, backoff_factor, backoff_max, backoff_jitter,
    cancel_requested, created_at, updated_at, started_at, finished_at, group_key, has_children,
    owner_priority, snoozes, timeout_seconds, wait_kind, flow_keys
from reclaimed cross join settled cross join begun;

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
select id, queue, type, user_id, status, payload, idempotency_key, attempts, max_attempts,
    priority, run_after, lease_until, lease_token, progress, result, error, errors,
    lease_seconds, backoff_base, backoff_factor, backoff_max, backoff_jitter,
    cancel_requested, created_at, updated_at, started_at, finished_at, group_key, has_children,
    owner_priority, snoozes, timeout_seconds, wait_kind, flow_keys
from tickq.jobs where id = %(id)s;

-- name: jobs_list
-- Jobs matching optional filters, newest first, a page after the (created_at, id) cursor.
select id, queue, type, user_id, status, payload, idempotency_key, attempts, max_attempts,
    priority, run_after, lease_until, lease_token, progress, result, error, errors,
    lease_seconds, backoff_base, backoff_factor, backoff_max, backoff_jitter,
    cancel_requested, created_at, updated_at, started_at, finished_at, group_key, has_children,
    owner_priority, snoozes, timeout_seconds, wait_kind, flow_keys
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
-- Cancel jobs (tickq.jobs_cancel, the one cancel; an application user's goes through
-- tickq.cancel instead): those not yet running at once, running ones asked to stop.
select {{job_columns}}
from tickq.jobs_cancel(%(ids)s::uuid[], coalesce(%(now)s::timestamptz, now()), null);

-- name: jobs_cancel_app
-- An application user's cancel of one of its jobs (tickq.cancel): the owner and the clock
-- are the session's and the database's; a refusal raises.
select {{job_columns}} from tickq.cancel(%(id)s::uuid);

-- name: jobs_retry_app
-- An application user's retry of one of its jobs (tickq.retry), keeping its steps, fresh,
-- or from a step; a refusal raises.
select {{job_columns}} from tickq.retry(%(id)s::uuid, %(fresh)s, %(from_step)s::text);

-- name: jobs_retry
-- Send dead (or, by id, cancelled) jobs back to the queue with fresh attempts
-- (tickq.jobs_retry, the one retry; an application user's goes through tickq.retry).
select {{job_columns}}
from tickq.jobs_retry(%(statuses)s::text[], %(ids)s::uuid[], %(types)s::text[],
                      %(queues)s::text[], %(limit)s, coalesce(%(now)s::timestamptz, now()),
                      null);

-- name: jobs_pending_exist
-- Whether any job of these queues is waiting or running (`tickq work --until-empty`).
select exists (
    select from tickq.jobs
    where queue = any(%(queues)s::text[]) and status in ('queued', 'retrying', 'running')
);

-- name: jobs_stats
-- Counts per queue, type and status, the age of the oldest runnable job of each, and how
-- many of the queued are suspended (tickq.jobs_stats, whose body the operator's counts share).
select queue, type, status, count, oldest_runnable_seconds, suspended
from tickq.jobs_stats(%(now)s::timestamptz)
order by queue, type, status;

-- name: operator_group_stats
-- jobs_stats_groups across every user, through the one function tickq_operator may call.
select queue, group_key, waiting, running, oldest_runnable_seconds
from tickq.operator_group_stats(%(now)s::timestamptz);

-- name: operator_stats
-- jobs_stats across every user, through the one function tickq_operator may call.
select queue, type, status, count, oldest_runnable_seconds, suspended
from tickq.operator_stats(%(now)s::timestamptz);

-- name: jobs_listen
-- Subscribe this session to the notification the enqueue trigger sends (triggers.sql).
listen tickq_jobs;

-- name: jobs_listening
-- Whether the session answering this statement listens for enqueues.
select 'tickq_jobs' = any(array(select pg_listening_channels()));

-- name: jobs_unlisten
-- Stop receiving enqueue notifications on this session.
unlisten tickq_jobs;

-- name: clock_now
-- The database clock, for shells that must agree with the store on "now".
select now();

-- name: user_scope
-- Name the user whose rows this transaction may see (row-level security), and act as
-- tickq_app where the login may, and bound its statements' time when a timeout is given
-- (milliseconds; null keeps the session's): all local to the transaction.
select set_config('tickq.user_id', %(user_id)s, true), tickq.act_as_app(),
       set_config('statement_timeout',
                  coalesce(%(statement_timeout)s::text, current_setting('statement_timeout')),
                  true);

-- name: app_role_enter
-- Act as tickq_app for the rest of this transaction, where the login may.
select tickq.act_as_app();

-- name: app_role_bypass
-- Why the current role would read past row-level security (null: it would not), and who
-- logged in.
select tickq.rls_bypass_reason(), session_user::text;

-- Cron schedules (queue_core/schedules.py)

-- name: schedules_add
-- Create a schedule, or replace one of the same name when %(replace)s; no row: it exists.
insert into tickq.schedules as s (
    name, cron, timezone, type, payload, queue, priority, max_attempts, missed, enabled,
    next_at, created_at, updated_at, group_key)
values (%(name)s, %(cron)s, %(timezone)s, %(type)s, %(payload)s::jsonb, %(queue)s,
        %(priority)s, %(max_attempts)s, %(missed)s, %(enabled)s, %(next_at)s,
        coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()),
        %(group_key)s::text)
on conflict (name) do update
    set cron = excluded.cron, timezone = excluded.timezone, type = excluded.type,
        payload = excluded.payload, queue = excluded.queue, priority = excluded.priority,
        max_attempts = excluded.max_attempts, missed = excluded.missed,
        enabled = excluded.enabled, next_at = excluded.next_at,
        updated_at = excluded.updated_at, group_key = excluded.group_key
    where %(replace)s
returning name, cron, timezone, type, payload, queue, priority, max_attempts, missed, enabled,
       last_fired, next_at, created_at, updated_at, group_key as "group";

-- name: schedules_list
-- Every schedule, by name.
select name, cron, timezone, type, payload, queue, priority, max_attempts, missed, enabled,
       last_fired, next_at, created_at, updated_at, group_key as "group"
from tickq.schedules order by name;

-- name: schedules_get
-- One schedule by name.
select name, cron, timezone, type, payload, queue, priority, max_attempts, missed, enabled,
       last_fired, next_at, created_at, updated_at, group_key as "group"
from tickq.schedules where name = %(name)s;

-- name: schedules_set_enabled
-- Switch a schedule on or off; switching on restarts it at its next occurrence from now.
update tickq.schedules
set enabled = %(enabled)s,
    next_at = coalesce(%(next_at)s, next_at),
    updated_at = coalesce(%(now)s::timestamptz, now())
where name = %(name)s
returning name, cron, timezone, type, payload, queue, priority, max_attempts, missed, enabled,
       last_fired, next_at, created_at, updated_at, group_key as "group";

-- name: schedules_remove
-- Delete a schedule; jobs it already enqueued stay.
delete from tickq.schedules where name = %(name)s returning name;

-- name: schedules_due
-- Names of enabled schedules whose next occurrence has come (schedules_due_idx).
select name from tickq.schedules
where enabled and next_at <= coalesce(%(now)s::timestamptz, now())
order by next_at, name;

-- name: schedules_lock
-- Take one due schedule for this scheduler run. SKIP LOCKED: a schedule another run is
-- firing right now is theirs; after they commit its next_at is in the future and it no
-- longer matches, so overlapping runs never fire one occurrence twice.
select name, cron, timezone, type, payload, queue, priority, max_attempts, missed, enabled,
       last_fired, next_at, created_at, updated_at, group_key as "group"
from tickq.schedules
where name = %(name)s and enabled and next_at <= coalesce(%(now)s::timestamptz, now())
for update skip locked;

-- name: schedules_advance
-- Mark occurrences up to now as handled, in the transaction that enqueued the fired one.
update tickq.schedules
set last_fired = coalesce(%(fired)s, last_fired),
    next_at = %(next_at)s,
    updated_at = coalesce(%(now)s::timestamptz, now())
where name = %(name)s;

-- Per-type and per-queue limits (queue_core/limits.py)

-- name: limits_configured
-- Whether any type limit, any queue limit and any cap per group exist: without them the
-- plain claim and enqueue statements run. And whether this login may write the jobs itself,
-- or goes through the application login's functions (Executor.through_functions). And
-- whether any flow limit or live hold exists: without one the claims never read flow keys.
select exists (select from tickq.type_limits), exists (select from tickq.queue_limits),
       exists (select from tickq.type_limits where max_running_per_group is not null)
       or exists (select from tickq.queue_group_limits),
       has_table_privilege('tickq.jobs', 'INSERT'), tickq.flow_active();

-- name: jobs_claim_limited
-- The claim of jobs_finish_and_claim under the type limits: see tickq.claim_limited
-- (queue_core/schema/functions/claim_limited.sql, whose comments call that claim jobs_claim).
select {{job_columns}}
from tickq.claim_limited(
    %(queues)s::text[], %(limit)s, %(lease_seconds)s, %(now)s::timestamptz,
    encode(%(seed)s::bytea, 'hex')::uuid);

-- name: queue_limits_admit
-- The limited queues that the incoming jobs would overflow; locks their limit rows until
-- the enqueue commits.
select queue, depth, max_depth from tickq.queue_admit(%(queues)s::text[], %(counts)s::integer[]);

-- name: type_limits_set
-- Create or change a type's limits; the rate log survives a change of the numbers.
insert into tickq.type_limits as l (
    type, max_running, rate_limit, rate_period_seconds, max_running_per_group)
values (%(type)s, %(max_running)s, %(rate_limit)s, %(rate_period_seconds)s,
        %(max_running_per_group)s)
on conflict (type) do update
    set max_running = excluded.max_running, rate_limit = excluded.rate_limit,
        rate_period_seconds = excluded.rate_period_seconds,
        max_running_per_group = excluded.max_running_per_group, updated_at = now()
returning type, max_running, rate_limit, rate_period_seconds, max_running_per_group;

-- name: type_limits_list
-- Every type limit, with the jobs of the type running now.
select l.type, l.max_running, l.rate_limit, l.rate_period_seconds, l.max_running_per_group,
       (select count(*) from tickq.jobs j where j.status = 'running' and j.type = l.type)
           as running
from tickq.type_limits l
order by l.type;

-- name: type_limits_clear
-- Remove a type's limits.
delete from tickq.type_limits where type = %(type)s returning type;

-- name: queue_limits_set
-- Create or change a queue's maximum depth and cap per owner; a bound not given (null)
-- keeps the stored one.
insert into tickq.queue_limits as l (queue, max_depth, max_depth_per_owner)
values (%(queue)s, %(max_depth)s, %(max_depth_per_owner)s)
on conflict (queue) do update
set max_depth = coalesce(excluded.max_depth, l.max_depth),
    max_depth_per_owner = coalesce(excluded.max_depth_per_owner, l.max_depth_per_owner),
    updated_at = now()
returning queue, max_depth, max_depth_per_owner;

-- name: queue_limits_list
-- Every queue limit, with the jobs waiting in the queue now (waiting for parents too).
select l.queue, l.max_depth, l.max_depth_per_owner,
       (select count(*) from tickq.jobs j
        where j.queue = l.queue and j.status in ('queued', 'retrying', 'waiting')) as waiting
from tickq.queue_limits l
order by l.queue;

-- name: queue_limits_clear
-- Remove a queue's maximum depth.
delete from tickq.queue_limits where queue = %(queue)s returning queue;

-- Fairness across groups (queue_core/fairness.py, tickq.claim_fair)

-- name: jobs_groups_span
-- The first and last group, in the fair claim's sweep order (tenant, then group), with jobs
-- waiting in a queue (nulls: none), looked at level by level from the best priority down,
-- stopping at the first level of several groups: only when they differ does the claim need
-- to take turns (jobs_claim_fair). Per level, one probe of jobs_claim_idx (the next level)
-- and two of jobs_fair_idx (its first and last group), however many jobs wait.
with recursive levels (priority, first, last) as (
    select l.priority,
           (select j.group_key from tickq.jobs j
            where j.status in ('queued', 'retrying') and j.queue = %(queue)s
              and j.priority = l.priority
            order by split_part(j.group_key, '/', 1), j.group_key
            limit 1),
           (select j.group_key from tickq.jobs j
            where j.status in ('queued', 'retrying') and j.queue = %(queue)s
              and j.priority = l.priority
            order by split_part(j.group_key, '/', 1) desc, j.group_key desc
            limit 1)
    from (select priority from tickq.jobs
          where status in ('queued', 'retrying') and queue = %(queue)s
          order by priority desc
          limit 1) l
    union all
    select n.priority,
           (select j.group_key from tickq.jobs j
            where j.status in ('queued', 'retrying') and j.queue = %(queue)s
              and j.priority = n.priority
            order by split_part(j.group_key, '/', 1), j.group_key
            limit 1),
           (select j.group_key from tickq.jobs j
            where j.status in ('queued', 'retrying') and j.queue = %(queue)s
              and j.priority = n.priority
            order by split_part(j.group_key, '/', 1) desc, j.group_key desc
            limit 1)
    from levels v
    cross join lateral (
        select priority from tickq.jobs
        where status in ('queued', 'retrying') and queue = %(queue)s and priority < v.priority
        order by priority desc
        limit 1) n
    where v.first = v.last
)
-- Across levels the least and greatest in the same order, so that the two differ exactly
-- when some level, or two levels, hold several groups.
select (select first from levels
        order by split_part(first, '/', 1), first limit 1),
       (select last from levels
        order by split_part(last, '/', 1) desc, last desc limit 1);

-- name: jobs_finish_and_claim_fair
-- jobs_finish_and_claim with the fair claim (tickq.claim_fair) in place of
-- the plain one: one round trip and one commit per batch, as on the plain path (a separate
-- finishing statement halved a drain's rate). The finishing part is the plain statement's
-- (the finish part). A job finished back to the queue by this statement may be leased
-- again by it, as by the next statement.
{{finish}}, claimed as (
    select {{job_columns}}
    from tickq.claim_fair(
        %(queue)s, %(limit)s, %(lease_seconds)s, %(now)s::timestamptz, %(after)s::text,
        %(positions)s::text[], encode(%(seed)s::bytea, 'hex')::uuid)
)
{{finish_report}};

-- name: jobs_claim_fair
-- The claim taking turns across groups, under every limit: see tickq.claim_fair
-- (queue_core/schema/functions/claim_fair.sql). %(after)s is the tenant this worker's last
-- fair claim ended with, %(positions)s the group it served last in each tenant it remembers.
select {{job_columns}}
from tickq.claim_fair(
    %(queue)s, %(limit)s, %(lease_seconds)s, %(now)s::timestamptz, %(after)s::text,
        %(positions)s::text[], encode(%(seed)s::bytea, 'hex')::uuid);

-- name: jobs_stats_groups
-- Per queue and group: jobs waiting (runnable now), running, and the age of the oldest
-- runnable job; only groups with live jobs (tickq.jobs_group_stats, whose body the
-- operator's group counts share).
select queue, group_key, waiting, running, oldest_runnable_seconds
from tickq.jobs_group_stats(%(now)s::timestamptz)
order by queue, group_key;

-- name: queue_group_limits_set
-- Create or change a queue's cap of running jobs per group.
insert into tickq.queue_group_limits as l (queue, max_running_per_group)
values (%(queue)s, %(max_running_per_group)s)
on conflict (queue) do update
    set max_running_per_group = excluded.max_running_per_group, updated_at = now()
returning queue, max_running_per_group;

-- name: queue_group_limits_list
-- Every queue's cap per group, with the most jobs one group of it runs now.
select l.queue, l.max_running_per_group,
       coalesce((select max(n) from (select count(*) as n from tickq.jobs j
                                     where j.status = 'running' and j.queue = l.queue
                                     group by j.group_key) g), 0) as busiest
from tickq.queue_group_limits l
order by l.queue;

-- name: queue_group_limits_clear
-- Remove a queue's cap per group.
delete from tickq.queue_group_limits where queue = %(queue)s returning queue;

-- Dependencies (queue_core/dependencies.py)

-- name: jobs_parents_lock
-- The parents a dependent enqueue names, locked until it commits, so none finishes unseen
-- in between: a parent finishing right now is waited for and its outcome read here, and a
-- parent finishing later finds the new child (see tickq.jobs_settle).
-- Locked in id order so two enqueues naming the same parents cannot deadlock.
select id, status, user_id
from tickq.jobs
where id = any(%(ids)s::uuid[])
order by id
for no key update;

-- name: jobs_enqueue_after
-- Insert jobs that wait for parents, and their edges, in one statement. Each job comes with
-- its status (waiting, or queued when every parent already succeeded), its count of
-- unfinished parents and whether a later job of the same call waits for it, all decided
-- under jobs_parents_lock. Returns the requests that did not insert, as jobs_enqueue does;
-- a request that did not insert adds no edge.
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), input as materialized (
    select *
    from unnest(%(id)s::uuid[], %(queue)s::text[], %(type)s::text[], %(user_id)s::uuid[],
                %(payload)s::text[], %(idempotency_key)s::text[], %(max_attempts)s::integer[],
                %(priority)s::integer[], %(run_after)s::timestamptz[], %(delay)s::float8[],
                %(lease_seconds)s::integer[], %(timeout_seconds)s::integer[], %(backoff_base)s::float8[],
                %(backoff_factor)s::float8[], %(backoff_max)s::float8[],
                %(backoff_jitter)s::float8[], %(group_key)s::text[], %(status)s::text[],
                %(pending_parents)s::integer[], %(has_children)s::boolean[],
                %(flow_keys)s::text[])
        as i (id, queue, type, user_id, payload, idempotency_key, max_attempts, priority,
              run_after, delay, lease_seconds, timeout_seconds, backoff_base, backoff_factor,
              backoff_max, backoff_jitter, group_key, status, pending_parents, has_children,
              flow_keys)
), claimed as (
    -- The key table decides duplicates, keys in one global order, as in jobs_enqueue.
    insert into tickq.job_keys as k (idempotency_key, user_id, job_id)
    select i.idempotency_key, i.user_id, i.id
    from input i
    where i.idempotency_key is not null
    order by i.idempotency_key, i.user_id
    on conflict (idempotency_key, user_id) do nothing
    returning k.job_id
), inserted as (
    insert into tickq.jobs as j (
        id, queue, type, user_id, payload, idempotency_key, max_attempts, priority,
        run_after, lease_seconds, timeout_seconds, backoff_base, backoff_factor, backoff_max,
        backoff_jitter, group_key, status, pending_parents, has_children, flow_keys,
        created_at, updated_at)
    select i.id, i.queue, i.type, i.user_id, i.payload::jsonb, i.idempotency_key,
           i.max_attempts, i.priority,
           coalesce(i.run_after, clock.now + i.delay * interval '1 second'),
           i.lease_seconds, i.timeout_seconds, i.backoff_base, i.backoff_factor, i.backoff_max,
           i.backoff_jitter,
           i.group_key, i.status, i.pending_parents, i.has_children,
           string_to_array(i.flow_keys, ' '), clock.now, clock.now
    from input i, clock
    where i.idempotency_key is null or i.id in (select c.job_id from claimed c)
    returning j.id, j.user_id
), linked as (
    insert into tickq.job_dependencies (child_id, parent_id, user_id, counted)
    select e.child_id, e.parent_id, n.user_id, e.counted
    from unnest(%(child_ids)s::uuid[], %(parent_ids)s::uuid[], %(counted)s::boolean[])
        as e (child_id, parent_id, counted)
    join inserted n on n.id = e.child_id
    returning parent_id
), flagged as (
    -- Parents enqueued earlier learn that they have children (has_children).
    update tickq.jobs p
    set has_children = true
    where p.id = any(%(earlier_parents)s::uuid[])
      and not p.has_children
      and p.id in (select parent_id from linked)
)
select i.id, j.id, j.status
from input i
left join tickq.job_keys k
    on k.idempotency_key = i.idempotency_key and k.user_id is not distinct from i.user_id
left join tickq.jobs j on j.id = k.job_id
where not exists (select from inserted where inserted.id = i.id);

-- name: jobs_settle_pending
-- One short transaction of settling what statements finishing parents left (see
-- tickq.jobs_settle_pending): the children settled, 0 when none is left.
select tickq.jobs_settle_pending(%(budget)s, %(now)s::timestamptz);

-- name: job_parent_results
-- The results of a job's parents, for job.parent_results (read when a handler asks for it).
select d.parent_id, p.result
from tickq.job_dependencies d
join tickq.jobs p on p.id = d.parent_id
where d.child_id = %(id)s;

-- name: job_relatives
-- A job's parents and children with their type and status, for `tickq show` and the API.
select relation, id, type, status from tickq.job_relatives(%(id)s::uuid);

-- Retention (queue_core/retention.py)

-- name: retention_policies_set
-- Create or change the policy of one scope (queue and/or type; null is "any").
insert into tickq.retention_policies as p (queue, type, statuses, max_age_seconds, keep_last)
values (%(queue)s, %(type)s, %(statuses)s::text[], %(max_age_seconds)s, %(keep_last)s)
on conflict on constraint retention_policies_scope_key do update
    set statuses = excluded.statuses, max_age_seconds = excluded.max_age_seconds,
        keep_last = excluded.keep_last, updated_at = now()
returning id, queue, type, statuses, max_age_seconds, keep_last;

-- name: retention_policies_list
-- Every policy, most specific first (the order in which they claim jobs).
select id, queue, type, statuses, max_age_seconds, keep_last from tickq.retention_policies
order by (type is not null)::int * 2 + (queue is not null)::int desc, queue, type;

-- name: retention_policies_clear
-- Remove the policy of one scope.
delete from tickq.retention_policies
where queue is not distinct from %(queue)s and type is not distinct from %(type)s
returning id;

-- part: retention_scope
-- The jobs in one policy's scope: its statuses, queue and type, and no more specific policy
-- matching them (a job belongs to the most specific policy that matches it, and to no
-- other).
j.status = any(%(statuses)s::text[])
      and (%(queue)s::text is null or j.queue = %(queue)s::text)
      and (%(type)s::text is null or j.type = %(type)s::text)
      and not exists (
          select from tickq.retention_policies o
          where (o.type is not null)::int * 2 + (o.queue is not null)::int > %(rank)s
            and (o.queue is null or o.queue = j.queue)
            and (o.type is null or o.type = j.type))

-- part: retention_doomed
-- The jobs one policy lets go, the one choice of retention_prune and retention_count: the
-- first CTEs of both, ending in the open doomed CTE that each closes (the prune takes a
-- batch of them, locked).
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), cutoff as materialized (
    -- The keep_last-th newest job in scope, re-read by every batch so jobs finishing
    -- meanwhile move it forward and are never the ones deleted.
    select j.finished_at, j.id
    from tickq.jobs j
    where {{retention_scope}}
    order by j.finished_at desc, j.id desc
    offset greatest(coalesce(%(keep_last)s::integer, 0) - 1, 0)
    limit 1
), doomed as materialized (
    select j.id
    from tickq.jobs j, clock
    where {{retention_scope}}
      and (
          (%(max_age_seconds)s::float8 is not null
           and j.finished_at < clock.now - %(max_age_seconds)s::float8 * interval '1 second')
          or %(keep_last)s::integer = 0
          or (%(keep_last)s::integer is not null
              and (j.finished_at, j.id) < (select finished_at, id from cutoff)))
      -- A parent stays while any child is unfinished: the child reads its result when it
      -- runs (job.parent_results). has_children spares other jobs the lookup.
      and not (j.has_children and exists (
          select from tickq.job_dependencies d join tickq.jobs c on c.id = d.child_id
          where d.parent_id = j.id
            and c.status not in ('succeeded', 'dead', 'cancelled')))
      -- A workflow child (job.map, job.call) goes with its parent, never before: the
      -- parent reads its result when it resumes.
      and not (j.has_children and exists (
          select from tickq.job_children k where k.child_id = j.id))

-- name: retention_prune
-- Delete up to %(batch)s jobs that one policy lets go (retention_doomed). Each call is its
-- own short transaction; SKIP LOCKED leaves rows someone is touching (a retry) for the next
-- pass.
{{retention_doomed}}
    limit %(batch)s
    for update of j skip locked
)
-- Their idempotency keys, steps, signals and edges go in the same statement, through the
-- tickq.jobs_forget trigger (queue_core/schema/triggers.sql).
delete from tickq.jobs j
where j.id = any(array(select id from doomed))
returning j.status;

-- name: retention_count
-- The jobs retention_prune would delete under one policy, counted by status (prune
-- --dry-run): the same choice of jobs (retention_doomed), without the batch limit, the
-- locks or the delete.
{{retention_doomed}}
)
select j.status, count(*)
from tickq.jobs j
where j.id = any(array(select id from doomed))
group by j.status;

-- name: partitions_ensure
-- Day partitions of finished jobs from today (UTC) to `days` ahead, and for each day that
-- has rows in the default partition (which move in); returns how many were created.
select tickq.jobs_partitions_ensure(
    (coalesce(%(now)s::timestamptz, now()) at time zone 'UTC')::date, %(days)s::integer);

-- name: partitions_list
-- The day partitions of finished jobs, oldest first, with their row estimates.
select d.name, d.day, d.upper_bound, greatest(c.reltuples, 0)::bigint as estimated_rows
from tickq.jobs_day_partitions() d
join pg_class c on c.oid = ('tickq.' || d.name)::regclass
order by d.name;

-- name: retention_partitions_droppable
-- Day partitions that retention drops whole instead of deleting their rows (retention.py),
-- oldest first: a catch-all policy exists (so each job has a governing policy), every
-- policy lets go of every job that finished before the partition's end (its max age is
-- that old, or it keeps none), and no job in it has a status that some policy keeps. Jobs
-- in other partitions are pruned row by row, as are those of any policy keeping the last N.
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), rules as materialized (
    select coalesce(bool_or(p.queue is null and p.type is null), false) as catch_all,
           min(case when p.keep_last = 0 then 'infinity'::timestamptz
                    when p.max_age_seconds is not null
                        then clock.now - p.max_age_seconds * interval '1 second'
                    else '-infinity'::timestamptz end) as before,
           array(select s from unnest(array['succeeded', 'dead', 'cancelled']) s
                 where exists (select from tickq.retention_policies k
                               where not (s = any(k.statuses)))) as kept
    from tickq.retention_policies p, clock
)
select d.name
from tickq.jobs_day_partitions() d, rules r
where r.catch_all and d.upper_bound <= r.before
  and not exists (select from tickq.jobs j
                  where j.status = any(r.kept)
                    and j.finished_at >= d.upper_bound - interval '1 day'
                    and j.finished_at < d.upper_bound)
order by d.name;

-- name: retention_partition_drop
-- Drop one day partition with its jobs' steps, signals and edges; what went, by queue, type
-- and status (nothing when a parent in it is still needed by an unfinished child).
select p.queue, p.type, p.status, p.n
from tickq.jobs_partition_drop(%(name)s) p;

-- The task catalogue (queue_core/catalog.py)

-- name: task_catalog_publish
-- Publish a registry's tasks: each type's defaults and settings, with the code version
-- that declared them, replacing what an earlier publication said of the same types.
insert into tickq.task_catalog as c (type, defaults, settings, code_version, published_at)
select t.type, t.defaults, t.settings, %(code_version)s, now()
from unnest(%(types)s::text[], %(defaults)s::jsonb[], %(settings)s::jsonb[])
    as t (type, defaults, settings)
on conflict (type) do update
    set defaults = excluded.defaults, settings = excluded.settings,
        code_version = excluded.code_version, published_at = excluded.published_at
returning c.type;

-- name: task_catalog_defaults
-- Every catalogued type's defaults, for enqueues by processes without the handler's module.
select type, defaults from tickq.task_catalog;

-- name: task_catalog_list
-- The catalogue as `tickq tasks` lists it.
select type, defaults, settings, code_version, published_at
from tickq.task_catalog
order by type;

-- name: job_histories_unfinished
-- The stored histories of unfinished durable jobs of the given types, for `tickq deploy
-- check` (queue_core/replay.py): each job's row, the code version its last run ran under,
-- its steps in the order they were stored (name and result: a replay returns them) and
-- the patches marked on it, what it waits for and its steps that retry (where its last run
-- stopped). Durable: it stored a step, suspended or marked a patch. Read in a read-only
-- transaction; ordered by id so that a report is stable.
select {{job_columns}}, j.code_version,
       (select coalesce(jsonb_agg(jsonb_build_array(s.name, s.result)
                                  order by s.finished_at, s.name), '[]'::jsonb)
        from tickq.job_steps s where s.job_id = j.id),
       (select coalesce(array_agg(t.name order by t.name), '{}'::text[])
        from tickq.job_step_tries t where t.job_id = j.id and t.kind = 'patch'),
       j.wait_kind, j.wait_name,
       (select coalesce(array_agg(t.name order by t.at, t.name), '{}'::text[])
        from tickq.job_step_tries t where t.job_id = j.id and t.kind = 'step')
from tickq.jobs j
where j.type = any(%(types)s::text[])
  and j.status in ('queued', 'waiting', 'retrying', 'running')
  and (j.resumes > 0 or j.wait_kind is not null
       or exists (select from tickq.job_steps s where s.job_id = j.id)
       or exists (select from tickq.job_step_tries t where t.job_id = j.id))
order by j.id;

-- name: jobs_unfinished_of_version
-- How many unfinished jobs last ran under the code version %(code_version)s, by status, for
-- `tickq deploy drained`: a pinned version's workers may stop once it is none.
select status, count(*)
from tickq.jobs
where code_version = %(code_version)s::text
  and status in ('queued', 'waiting', 'retrying', 'running')
group by status
order by status;

-- name: jobs_finish_and_claim_pinned
-- jobs_finish_and_claim for a pinned worker (TICKQ_PIN_VERSION=on): it leases only jobs
-- that have not run yet (no code version) or last ran under its own, %(code_version)s, so
-- a durable job replays on the code that stored its history. A statement of its own: the
-- plain claims stay as they are, and workers that do not pin pay nothing.
{{finish}}, {{pick_runnable}}
      and queue = any(%(queues)s::text[])
      and (code_version is null or code_version = %(code_version)s::text)
{{pick_in_claim_order}}, {{lease_picked}}
{{finish_report}};

-- name: flow_limits_set
-- Create or change a key prefix's flow limits (queue_core/flow.py); the next claim applies
-- them.
insert into tickq.flow_limits as l (prefix, max_running, rate_limit, rate_period_seconds)
values (%(prefix)s, %(max_running)s, %(rate_limit)s, %(rate_period_seconds)s)
on conflict (prefix) do update
    set max_running = excluded.max_running, rate_limit = excluded.rate_limit,
        rate_period_seconds = excluded.rate_period_seconds, updated_at = now()
returning prefix, max_running, rate_limit, rate_period_seconds;

-- name: flow_limits_list
-- Every limited key prefix.
select prefix, max_running, rate_limit, rate_period_seconds
from tickq.flow_limits
order by prefix;

-- name: flow_limits_clear
-- Remove a prefix's limits (its keys fall to a shorter limited prefix, or go free).
delete from tickq.flow_limits where prefix = %(prefix)s returning prefix;

-- name: flow_keys_now
-- The flow keys with live jobs or a live hold: jobs running and waiting (runnable now) of
-- each, the hold's end, and the prefix that governs it (tickq.flow_limit_of).
with counts as (
    select k as key,
           count(*) filter (where j.status = 'running') as running,
           count(*) filter (where j.status in ('queued', 'retrying')
                              and j.run_after <= coalesce(%(now)s::timestamptz, now()))
               as waiting
    from tickq.jobs j, unnest(j.flow_keys) k
    where j.status in ('queued', 'running', 'retrying') and j.flow_keys <> '{}'
    group by k
), holds as (
    select key, until from tickq.flow_holds
    where until > coalesce(%(now)s::timestamptz, now())
)
select coalesce(c.key, h.key) as key, coalesce(c.running, 0) as running,
       coalesce(c.waiting, 0) as waiting, h.until as held_until,
       (select g.prefix from tickq.flow_limit_of(coalesce(c.key, h.key)) g) as prefix
from counts c full join holds h on h.key = c.key
order by 1
limit %(limit)s;

-- name: flow_hold
-- Keep every job of a key from starting until %(seconds)s from now (at most a day, the
-- table's check); a longer hold already set stands.
insert into tickq.flow_holds as h (key, until, set_at)
values (%(key)s, coalesce(%(now)s::timestamptz, now()) + %(seconds)s * interval '1 second',
        coalesce(%(now)s::timestamptz, now()))
on conflict (key) do update
    set until = greatest(h.until, excluded.until), set_at = greatest(h.set_at, excluded.set_at)
returning key, until;

-- name: flow_hold_fenced
-- flow_hold from a running handler (job.hold_flow): only while the job still holds its
-- lease, so a handler whose job was taken over changes nothing.
insert into tickq.flow_holds as h (key, until, set_at)
select %(key)s, coalesce(%(now)s::timestamptz, now()) + %(seconds)s * interval '1 second',
       coalesce(%(now)s::timestamptz, now())
where exists (select from tickq.jobs j
              where j.id = %(id)s and j.lease_token = %(lease_token)s
                and j.status = 'running')
on conflict (key) do update
    set until = greatest(h.until, excluded.until), set_at = greatest(h.set_at, excluded.set_at)
returning key, until;

-- name: flow_hold_release
-- End a key's hold at once.
delete from tickq.flow_holds where key = %(key)s returning key;

-- name: job_flow_waits
-- The flow key a job waits for (tickq.flow_job_waits), for its views; null when none.
select tickq.flow_job_waits(%(id)s::uuid);
