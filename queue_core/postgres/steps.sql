-- Named statements of durable steps (queue_core/step_store.py), loaded with queries.sql.
-- Tables and the columns on tickq.jobs are in queue_core/schema/tables.sql.

-- name: job_durable_load
-- The durable state of a running job, read once when its handler first uses a step: stored
-- steps and signals, resumes, what its last suspension waited for, the database clock, and
-- the tries of its retried steps and undos (with its compensation, once begun).
-- Fenced by the lease token: no row means the lease is lost. The run's code version is
-- recorded on the job here, in the same statement: every durable run loads before it
-- replays or stores anything, and a run under the version already recorded writes nothing.
with marked as (
    update tickq.jobs
    set code_version = %(code_version)s::text
    where id = %(id)s and lease_token = %(lease_token)s and status = 'running'
      and %(code_version)s::text is not null
      and code_version is distinct from %(code_version)s::text
)
select j.resumes, j.wait_kind, j.wait_name, j.wait_until,
       coalesce(%(now)s::timestamptz, now()),
       (select coalesce(jsonb_object_agg(s.name, s.result), '{}'::jsonb)
        from tickq.job_steps s where s.job_id = j.id),
       (select coalesce(sum(s.size), 0) from tickq.job_steps s where s.job_id = j.id),
       (select coalesce(jsonb_object_agg(g.name, g.payload), '{}'::jsonb)
        from tickq.job_signals g where g.job_id = j.id),
       (select coalesce(sum(g.size), 0) from tickq.job_signals g where g.job_id = j.id),
       (select coalesce(jsonb_object_agg(t.kind || ':' || t.name, jsonb_build_object(
                   'tries', t.tries, 'error', t.error, 'done', t.done_at is not null)),
                '{}'::jsonb)
        from tickq.job_step_tries t where t.job_id = j.id)
from tickq.jobs j
where j.id = %(id)s and j.lease_token = %(lease_token)s and j.status = 'running';

-- name: job_steps_insert
-- Store one completed step, only while the job runs under the given lease token, marked
-- compensable when it has an undo (tickq.job_compensation_spare reads the mark).
-- FOR SHARE holds off a reclaim or a new claim until this insert commits: the insert of a
-- stale worker either sees the new token and stores nothing, or commits before the row
-- moves on, so the load of the next attempt sees it. The primary key keeps one result per name.
-- %(code_version)s: the version of the code that ran the step.
with holder as (
    select id
    from tickq.jobs
    where id = %(id)s and lease_token = %(lease_token)s and status = 'running'
    for share
)
insert into tickq.job_steps (job_id, name, result, size, finished_at, compensable,
                             code_version)
select holder.id, %(name)s, %(result)s::jsonb, %(size)s, coalesce(%(now)s::timestamptz, now()),
       %(compensable)s, %(code_version)s::text
from holder
on conflict (job_id, name) do nothing
returning finished_at;

-- name: jobs_suspend
-- Leave the worker: back to queued at the wake time, the attempt given back, steps kept,
-- resumes + 1, and with %(try_kind)s a failed try counted. Fenced by the lease token; a
-- job asked to cancel is left to the runner.
-- `signals` is read from the row being updated: a signal committed while this statement
-- waited for the row lock is seen (see tickq.jobs.signals), so the job wakes at once.
with clock as materialized (
    -- The wake time: given, or `delay` seconds from now on the database clock.
    select coalesce(%(now)s::timestamptz, now()) as now,
           coalesce(%(wait_until)s::timestamptz,
                    coalesce(%(now)s::timestamptz, now())
                    + %(delay)s::float8 * interval '1 second') as wake
), suspended as (
    update tickq.jobs j
    set status = 'queued',
        attempts = j.attempts - 1,
        resumes = coalesce(j.resumes, 0) + 1,
        run_after = case when %(wait_kind)s = 'signal' and %(wait_name)s::text = any(j.signals)
                         then clock.now else clock.wake end,
        wait_kind = %(wait_kind)s,
        wait_name = %(wait_name)s::text,
        wait_until = clock.wake,
        -- A run that suspends before it loads (job.suspend() first) records its version too.
        code_version = coalesce(%(code_version)s::text, j.code_version),
        lease_until = null,
        lease_token = null,
        updated_at = clock.now
    from clock
    where j.id = %(id)s and j.lease_token = %(lease_token)s and j.status = 'running'
      and not j.cancel_requested
    returning j.id, j.run_after, j.wait_until
), tried as (
    -- A step's failed try (its own retry policy), counted with the suspension that waits
    -- for the next one, so a crash cannot keep one without the other.
    insert into tickq.job_step_tries (job_id, kind, name, tries, error, at)
    select suspended.id, %(try_kind)s, %(try_name)s, %(try_add)s, %(try_error)s, clock.now
    from suspended, clock
    where %(try_kind)s::text is not null
    on conflict (job_id, kind, name) do update
    set tries = tickq.job_step_tries.tries + excluded.tries,
        error = coalesce(excluded.error, tickq.job_step_tries.error),
        at = excluded.at
)
select run_after, wait_until from suspended;

-- name: job_signals_send
-- Keep a signal for a live job, waking it when it waits for that name
-- (tickq.job_signals_send; an application user's goes through tickq.signal).
select status, taken, bytes, held, kept, woke
from tickq.job_signals_send(%(id)s::uuid, %(name)s::text, %(payload)s::jsonb, %(size)s,
                            %(max_bytes)s, %(max_signals)s,
                            coalesce(%(now)s::timestamptz, now()));

-- name: job_signals_send_app
-- An application user's signal to one of its jobs (tickq.signal): whether it woke the job;
-- a refusal raises.
select tickq.signal(%(id)s::uuid, %(name)s::text, %(payload)s::jsonb);

-- name: job_durable_show
-- What the views of one job show of its durable side (tickq.job_durable: resumes, wait,
-- how its handler ran it, steps and signals by name, time and size, not results, the tries
-- of retried steps and of undos, the child jobs of each map step). No row: no such job (or
-- one of another user).
select status, resumes, wait_kind, wait_name, wait_until, batch_id, completed_in_transaction,
       steps, signals, tries, maps, code_version
from tickq.job_durable(%(id)s::uuid);

-- name: job_durable_clear
-- Forget the steps, signals and wait of a finished job, before a fresh retry sends it back
-- (tickq.job_durable_clear).
select tickq.job_durable_clear(%(id)s::uuid);

-- name: job_step_tries_add
-- Count one more try of a step that retries on its own, or of an undo, or begin the job's
-- compensation (kind 'compensation', named by the status it ends in, keeping the first
-- error), only while the job runs under the given lease token (FOR SHARE: as
-- job_steps_insert). Committed before the try's outcome is acted on, so a crash counts.
with holder as (
    select id
    from tickq.jobs
    where id = %(id)s and lease_token = %(lease_token)s and status = 'running'
    for share
)
insert into tickq.job_step_tries (job_id, kind, name, tries, error, at)
select holder.id, %(kind)s, %(name)s, %(add)s, %(error)s, coalesce(%(now)s::timestamptz, now())
from holder
on conflict (job_id, kind, name) do update
set tries = tickq.job_step_tries.tries + excluded.tries,
    error = coalesce(excluded.error, tickq.job_step_tries.error),
    at = excluded.at
returning tries;

-- name: job_step_tries_done
-- An undo ran to the end: recorded once, fenced by the lease token like a step.
with holder as (
    select id
    from tickq.jobs
    where id = %(id)s and lease_token = %(lease_token)s and status = 'running'
    for share
)
update tickq.job_step_tries t
set done_at = coalesce(%(now)s::timestamptz, now())
from holder
where t.job_id = holder.id and t.kind = 'undo' and t.name = %(name)s and t.done_at is null
returning t.done_at;

-- name: jobs_compensation_begin
-- Record that a job compensates: the status it ends in and the error that ended it (kept
-- from the first time). Its attempts may run out before its undos: a worker that dies
-- during one is reclaimed as any job, and must come back to finish them, so max_attempts
-- leaves %(spare)s attempts (the undos' own tries bound them), and a cancel asked of it is
-- taken as done (the compensation ends it cancelled) lest the reclaim cancel it before its
-- undos. The max_attempts declared and the attempts counted so far are kept (the first
-- time) for the views. Fenced by the lease token; no row: the lease is lost.
with raised as (
    update tickq.jobs
    set max_attempts = greatest(max_attempts, attempts + %(spare)s),
        declared_max_attempts = coalesce(declared_max_attempts, max_attempts),
        compensation_attempts = coalesce(compensation_attempts, attempts),
        cancel_requested = false
    where id = %(id)s and lease_token = %(lease_token)s and status = 'running'
    returning id
), kept as (
    insert into tickq.job_step_tries (job_id, kind, name, tries, error, at)
    select raised.id, 'compensation', %(ends)s, 0, %(error)s,
           coalesce(%(now)s::timestamptz, now())
    from raised
    on conflict (job_id, kind, name) do nothing
)
select id from raised;

-- part: children_enqueue
-- Enqueue a step's child jobs and suspend their parent until they have ended, in one
-- statement: either both happen or neither, so a parent that crashes never enqueues its
-- children twice (and a resumed one finds them in job_children). Children run in the
-- parent's queue, group and tenant, at its priority; the first %(max_running)s are queued,
-- the rest wait for siblings to end (tickq.job_children_settle). has_children on both ends:
-- a finishing child, and a parent ending dead or cancelled, settle the other side.
-- Fenced by the lease token (the statement's `parent`, which locks the parent's row); a
-- parent asked to cancel enqueues nothing.
spec as (
    select s.id, s.payload, s.n
    from unnest(%(child_ids)s::uuid[], %(payloads)s::text[]) with ordinality as s (id, payload, n)
), children as (
    insert into tickq.jobs (id, queue, type, user_id, status, payload, max_attempts, priority,
                            lease_seconds, timeout_seconds, backoff_base, backoff_factor,
                            backoff_max, backoff_jitter, group_key, has_children, run_after,
                            created_at, updated_at)
    select s.id, parent.queue, %(type)s, parent.user_id,
           case when s.n <= %(max_running)s then 'queued' else 'waiting' end, s.payload::jsonb,
           %(max_attempts)s, parent.priority, %(lease_seconds)s, %(timeout_seconds)s::integer,
           %(backoff_base)s,
           %(backoff_factor)s, %(backoff_max)s, %(backoff_jitter)s, parent.group_key, true,
           clock.now, clock.now, clock.now
    from spec s, parent, clock
    returning id
), links as (
    insert into tickq.job_children (parent_id, step, idx, child_id, user_id, max_running,
                                    siblings)
    select parent.id, %(step)s, s.n - 1, s.id, parent.user_id, %(max_running)s,
           cardinality(%(child_ids)s::uuid[])
    from spec s, parent
    returning child_id
), suspended as (
    update tickq.jobs j
    set status = 'queued',
        attempts = j.attempts - 1,
        resumes = coalesce(j.resumes, 0) + 1,
        run_after = %(forever)s::timestamptz,
        wait_kind = 'children',
        wait_name = %(step)s,
        wait_until = %(forever)s::timestamptz,
        pending_parents = cardinality(%(child_ids)s::uuid[]),
        has_children = true,
        lease_until = null,
        lease_token = null,
        updated_at = clock.now
    from parent, clock
    where j.id = parent.id and j.status in ('waiting', 'queued', 'running', 'retrying')
    returning j.run_after
)

-- name: job_children_enqueue
-- A step's children enqueued and their parent suspended (the part children_enqueue), where
-- no queue has a limit.
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), parent as materialized (
    select id, queue, user_id, priority, group_key
    from tickq.jobs
    where id = %(id)s and lease_token = %(lease_token)s and status = 'running'
      and not cancel_requested
    for no key update
), {{children_enqueue}}
select (select count(*) from children), (select count(*) from links),
       (select run_after from suspended);

-- name: job_children_enqueue_admitted
-- job_children_enqueue where some queue has a limit: the children are admitted to their
-- queue %(queue)s (the parent's) first, in the same statement, so the admission and the
-- enqueue are one transaction whoever else uses the connection. tickq.queue_admit counts them
-- against its maximum depth, tickq.queue_admit_owner against its cap of their owner
-- %(owner)s (the parent's; none without an owner), each under the limit row's lock with a
-- fresh count; when they would pass either, `refused` says which (of_owner: the owner's
-- cap), the parent is not taken and nothing is written.
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), refused as materialized (
    select a.queue, a.depth, a.max_depth, false as of_owner
    from tickq.queue_admit(array[%(queue)s::text],
                           array[cardinality(%(child_ids)s::uuid[])]) a
    union all
    select o.queue, o.depth, o.max_depth, true
    from tickq.queue_admit_owner(%(queue)s::text, %(owner)s::uuid,
                                 cardinality(%(child_ids)s::uuid[])) o
), parent as materialized (
    select id, queue, user_id, priority, group_key
    from tickq.jobs
    where id = %(id)s and lease_token = %(lease_token)s and status = 'running'
      and not cancel_requested and not exists (select from refused)
    for no key update
), {{children_enqueue}}
select (select count(*) from children), (select count(*) from links),
       (select run_after from suspended), r.queue, r.depth, r.max_depth, r.of_owner
from (select 1) one
left join (select * from refused limit 1) r on true;

-- name: job_children_results
-- The children of one step of a job, in the step's order: id, status, result and error.
select c.id, c.status, c.result, c.error
from tickq.job_children k
join tickq.jobs c on c.id = k.child_id
where k.parent_id = %(id)s and k.step = %(step)s
order by k.idx;

-- name: job_steps_forget_from
-- Replay from a step: a dead or cancelled job forgets the step %(name)s and every step
-- stored after it (tickq.job_steps_forget_from). Returns the names forgotten; no row: no
-- such step, or the job is not dead or cancelled.
select name from tickq.job_steps_forget_from(%(id)s::uuid, %(name)s::text) as f (name);

-- name: job_compensation_clear
-- A retry that keeps a compensated job's steps forgets those its undos undid, and the
-- compensation (tickq.job_compensation_clear).
select tickq.job_compensation_clear(%(id)s::uuid);

