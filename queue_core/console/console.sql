-- Named statements of the operator console (queue_core/policies/pauses.py, console/jobs.py, console/charts.py).
-- The operator's statements call the security-definer functions of queue_core/schema, so an
-- operator login reads no job row beyond what each function returns.

-- name: queue_pauses_probe
-- The paused queues, for the claim to leave out (re-read every few seconds per store).
select coalesce(array_agg(queue), '{}') from tickq.queue_pauses;

-- name: queue_pause
-- Pause a queue (a paused one keeps who paused it first and when).
select * from tickq.queue_pause(%(queue)s, %(by)s, %(reason)s, %(now)s::timestamptz);

-- name: queue_resume
-- Resume a queue; no row when it was not paused.
select * from tickq.queue_resume(%(queue)s);

-- name: queue_pauses_list
-- Every paused queue, by name.
select * from tickq.queue_pauses_list();

-- name: depth_samples_record
-- One depth sample per queue at %(now)s, and the samples older than %(keep_seconds)s
-- deleted: the history keeps its own, short retention.
with clock as materialized (
    select coalesce(%(now)s::timestamptz, now()) as now
), pruned as (
    delete from tickq.queue_depth_samples s
    using clock
    where s.sampled_at < clock.now - %(keep_seconds)s * interval '1 second'
)
insert into tickq.queue_depth_samples (sampled_at, queue, depth, running,
                                       oldest_runnable_seconds)
select clock.now, q.queue, q.depth, q.running, q.oldest
from unnest(%(queues)s::text[], %(depths)s::bigint[], %(running)s::bigint[],
            %(oldest)s::float8[]) as q (queue, depth, running, oldest), clock
on conflict (sampled_at, queue) do nothing;

-- name: throughput
-- Succeeded, failed (retried) and dead per bucket since %(since)s (tickq.throughput).
select bucket, succeeded, failed, dead
from tickq.throughput(%(since)s::timestamptz, %(bucket_seconds)s, %(queue)s,
                      %(now)s::timestamptz);

-- name: depth_history
-- Depth samples since %(since)s, oldest first.
select sampled_at, queue, depth, running, oldest_runnable_seconds
from tickq.depth_history(%(since)s::timestamptz, %(queue)s);

-- name: operator_jobs
-- Every user's jobs matching the filter, newest first, without payloads or results, a large
-- progress left out and the error cut, as every list of jobs (tickq.operator_jobs).
select id, queue, type, user_id, group_key, status, attempts, max_attempts, priority,
       progress, error, run_after, created_at, updated_at, finished_at, truncated, wait_kind,
       compensation_runs
from tickq.operator_jobs(%(statuses)s::text[], %(types)s::text[], %(queues)s::text[],
                         %(groups)s::text[], %(error)s, %(created_from)s::timestamptz,
                         %(created_to)s::timestamptz, %(after_created)s::timestamptz,
                         %(after_id)s::uuid, %(limit)s);

-- name: operator_job
-- One job of any user, without its payload or result.
select id, queue, type, user_id, group_key, status, attempts, max_attempts, priority,
       progress, error, errors, run_after, lease_until, created_at, updated_at, started_at,
       finished_at, timeout_seconds, compensation_runs
from tickq.operator_job(%(id)s::uuid);

-- name: operator_job_gate
-- The debounce or throttle that made one job of any user: its kind and count.
select kind, enqueues from tickq.operator_job_gate(%(id)s::uuid);

-- name: operator_job_durable
-- The durable side of one job of any user: step and signal names, times and sizes, its wait,
-- the code version its last run ran under.
select status, resumes, wait_kind, wait_name, wait_until, batch_id, completed_in_transaction,
       steps, signals, tries, maps, code_version
from tickq.operator_job_durable(%(id)s::uuid);

-- name: operator_job_relatives
-- The parents and children of one job of any user, with their type and status.
select relation, id, type, status from tickq.operator_job_relatives(%(id)s::uuid);

-- name: operator_retry
-- Retry jobs of any user by id; one row per id saying what happened.
select id, status, outcome from tickq.operator_retry(%(ids)s::uuid[], %(now)s::timestamptz);

-- name: operator_cancel
-- Cancel jobs of any user by id; one row per id saying what happened.
select id, status, outcome from tickq.operator_cancel(%(ids)s::uuid[], %(now)s::timestamptz);

-- name: operator_count_dead
-- How many dead jobs of these types and queues there are.
select tickq.operator_count_dead(%(types)s::text[], %(queues)s::text[]);

-- name: operator_retry_dead
-- Retry all dead jobs of these types and queues if there are exactly %(expected)s.
select id, status, outcome
from tickq.operator_retry_dead(%(types)s::text[], %(queues)s::text[], %(expected)s::bigint,
                               %(now)s::timestamptz);

-- part: search_page
-- The page (tickq.jobs_search, the one search, whose body the operator's list shares): the
-- filters (error text, creation range), newest first after the cursor; row-level security
-- keeps an application user to their own jobs, whose owner index orders them.
tickq.jobs_search(
    %(statuses)s::text[], %(types)s::text[], %(queues)s::text[], %(groups)s::text[],
    %(error)s::text, %(created_from)s::timestamptz, %(created_to)s::timestamptz,
    %(after_created)s::timestamptz, %(after_id)s::uuid, %(limit)s::integer)

-- name: jobs_search
-- jobs_list with the page's filters: whole jobs.
select id, queue, type, user_id, status, payload, idempotency_key, attempts, max_attempts,
    priority, run_after, lease_until, lease_token, progress, result, error, errors,
    lease_seconds, backoff_base, backoff_factor, backoff_max, backoff_jitter,
    cancel_requested, created_at, updated_at, started_at, finished_at, group_key, has_children,
    owner_priority, snoozes, timeout_seconds, wait_kind, flow_keys,
    declared_max_attempts, compensation_attempts
from {{search_page}}
order by created_at desc, id desc;

-- name: jobs_search_listed
-- jobs_search as lists show the jobs (the API's GET /jobs): a payload, result, progress or
-- error history larger than tickq.list_left_out lets a list show is null, the error is cut
-- to its first 200 characters (LIST_ERROR_CHARS in queue_core/model/pages.py), and `truncated`
-- names each one left out or cut with the bytes it holds ({} when nothing). The page's rows
-- are chosen first, so only they are measured, each from its values' headers: a large value
-- is never read.
select j.id, j.queue, j.type, j.user_id, j.status,
       case when b.payload is null then j.payload end as payload, j.idempotency_key,
       j.attempts, j.max_attempts, j.priority, j.run_after, j.lease_until, j.lease_token,
       case when b.progress is null then j.progress end as progress,
       case when b.result is null then j.result end as result,
       left(j.error, 200) as error,
       case when b.errors is null then j.errors end as errors,
       j.lease_seconds, j.backoff_base, j.backoff_factor, j.backoff_max, j.backoff_jitter,
       j.cancel_requested, j.created_at, j.updated_at, j.started_at, j.finished_at,
       j.group_key, j.has_children, j.owner_priority, j.snoozes, j.timeout_seconds, j.wait_kind,
       j.flow_keys, j.declared_max_attempts, j.compensation_attempts,
       jsonb_strip_nulls(jsonb_build_object(
           'payload', b.payload, 'result', b.result, 'progress', b.progress,
           'errors', b.errors, 'error', b.error)) as truncated
from (select id, queue, type, user_id, status, payload, idempotency_key, attempts,
             max_attempts, priority, run_after, lease_until, lease_token, progress, result,
             error, errors, lease_seconds, backoff_base, backoff_factor, backoff_max,
             backoff_jitter, cancel_requested, created_at, updated_at, started_at,
             finished_at, group_key, has_children, owner_priority, snoozes, timeout_seconds, wait_kind,
             flow_keys, declared_max_attempts, compensation_attempts
      from {{search_page}}) j
cross join lateral (
    select tickq.list_left_out(j.payload) as payload, tickq.list_left_out(j.result) as result,
           tickq.list_left_out(j.progress) as progress,
           tickq.list_left_out(j.errors) as errors,
           case when char_length(j.error) > 200 then octet_length(j.error) end as error) b
order by j.created_at desc, j.id desc;

-- name: role_operator
-- Act as tickq_operator until this transaction ends: the operator console's statements
-- call only functions that role may execute.
set local role tickq_operator;
