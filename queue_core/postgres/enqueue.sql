-- Enqueue: one job, a batch, jobs after parents, and the key holders a duplicate reads
-- (queue_core/postgres/enqueue.py).
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

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
        owner_priority, snoozes, timeout_seconds, wait_kind, flow_keys,
    declared_max_attempts, compensation_attempts, false as duplicate
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
    j.timeout_seconds, j.wait_kind, j.flow_keys, j.declared_max_attempts,
    j.compensation_attempts, true as duplicate
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

-- name: jobs_get
-- One job by id (row-level security hides other users' jobs).
select id, queue, type, user_id, status, payload, idempotency_key, attempts, max_attempts,
    priority, run_after, lease_until, lease_token, progress, result, error, errors,
    lease_seconds, backoff_base, backoff_factor, backoff_max, backoff_jitter,
    cancel_requested, created_at, updated_at, started_at, finished_at, group_key, has_children,
    owner_priority, snoozes, timeout_seconds, wait_kind, flow_keys,
    declared_max_attempts, compensation_attempts
from tickq.jobs where id = %(id)s;

-- name: queue_limits_admit
-- The limited queues that the incoming jobs would overflow; locks their limit rows until
-- the enqueue commits.
select queue, depth, max_depth from tickq.queue_admit(%(queues)s::text[], %(counts)s::integer[]);

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
