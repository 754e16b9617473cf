-- The claim: the statements that persist a batch's outcomes and lease the next jobs (plain,
-- several queues, limited, fair), the parts they share, and LISTEN for idle workers
-- (queue_core/postgres/claim.py).
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

-- The claim statements are composed of the parts below ("-- part: <name>", spliced in
-- where a statement says {{name}}, by queue_core/postgres/statements.py when it loads this file), so
-- each rule of the finish and the claim is written once: the finish (persisting a batch's
-- outcomes) here, the pick of the plain claim here, the lease of every claim in
-- tickq.jobs_lease (queue_core/schema/functions/jobs_lease.sql), which the limited and fair
-- claims (tickq.claim_limited, tickq.claim_fair) call too.
-- part: finish
-- Persist a batch's outcomes: the first CTEs of every statement that finishes and claims
-- (jobs_finish_and_claim, jobs_finish_and_claim_queues, jobs_finish_and_claim_fair), which
-- then add their claimed CTE and end with finish_report. Its guard is read by the plain
-- picks (pick_runnable) and reported by finish_report (the limit-aware claims ignore it).
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), guard as materialized (
    -- Whether any type limit, cap per group, flow limit or live hold exists: the plain
    -- picks (pick_runnable) claim nothing then, and the store, told so by finish_report,
    -- forgets its cached look at the limit tables (LimitsProbe) and claims again with the
    -- claim that honours them, in the same call. So a limit or hold set by another process
    -- takes effect at the next claim; without any, three probes of empty tables.
    select exists (select from tickq.type_limits)
           or exists (select from tickq.queue_group_limits)
           or tickq.flow_active() as limited
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
select case when row_number() over () = 1 then f.ids end as ids,
       (select limited from guard) as limited, c.*
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
    owner_priority, snoozes, timeout_seconds, wait_kind, flow_keys,
    declared_max_attempts, compensation_attempts

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
      and not (select limited from guard)

-- part: pick_in_claim_order
-- The end of pick_runnable: best first, at most %(limit)s, each row locked. This order and
-- pick_runnable's condition are the claim's rules: tests/unit/test_claim_order_shared.py
-- holds the limited and fair claims' functions, the claim indexes and the Python batch
-- order to them. The limit is read through a subquery so that the planner prices it alike
-- with or without its value: a prepared claim then keeps one generic plan, where a limit
-- it can see makes every execution's own plan look cheaper, and each statement was
-- planned again (about a millisecond of the server's time, half of a 12-job statement).
    order by priority desc, owner_priority desc, run_after, created_at
    limit (select %(limit)s::int)
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

-- name: jobs_listen
-- Subscribe this session to the notification the enqueue trigger sends (triggers.sql).
listen tickq_jobs;

-- name: jobs_listening
-- Whether the session answering this statement listens for enqueues.
select 'tickq_jobs' = any(array(select pg_listening_channels()));

-- name: jobs_unlisten
-- Stop receiving enqueue notifications on this session.
unlisten tickq_jobs;

-- name: jobs_claim_limited
-- The claim of jobs_finish_and_claim under the type limits: see tickq.claim_limited
-- (queue_core/schema/functions/claim_limited.sql, whose comments call that claim jobs_claim).
select {{job_columns}}
from tickq.claim_limited(
    %(queues)s::text[], %(limit)s, %(lease_seconds)s, %(now)s::timestamptz,
    encode(%(seed)s::bytea, 'hex')::uuid);

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
