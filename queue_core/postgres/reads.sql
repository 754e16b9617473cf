-- Reading the queue, and the operator's actions on single jobs: get, lists, relatives,
-- stats, cancel and retry (queue_core/postgres/reads.py).
--
-- Each statement starts with "-- name: <noun>_<verb>" and a line saying what it does, and is
-- loaded once at import (queue_core/postgres/statements.py). Every statement that reads the
-- time takes %(now)s and falls back to the database clock, so production uses one clock
-- (Lambda clocks drift) and tests pass an explicit instant. Statements that return jobs list
-- the job columns by name ({{job_columns}}, a part of claim.sql); the store maps rows by name.

-- name: jobs_traceparents
-- The trace contexts recorded on running jobs, for the runner's consumer spans. Names the
-- live partition's statuses, so it reads jobs_live alone.
select id, traceparent from tickq.jobs
where id = any(%(ids)s::uuid[]) and traceparent is not null
  and status in ('waiting', 'queued', 'running', 'retrying');

-- name: job_gate_of
-- A job's gate, for its views: the kind, the key, the enqueues that landed on it.
select kind, gate_key, enqueues, first_at from tickq.job_gates where job_id = %(id)s;

-- name: jobs_list
-- Jobs matching optional filters, newest first, a page after the (created_at, id) cursor.
select id, queue, type, user_id, status, payload, idempotency_key, attempts, max_attempts,
    priority, run_after, lease_until, lease_token, progress, result, error, errors,
    lease_seconds, backoff_base, backoff_factor, backoff_max, backoff_jitter,
    cancel_requested, created_at, updated_at, started_at, finished_at, group_key, has_children,
    owner_priority, snoozes, timeout_seconds, wait_kind, flow_keys,
    declared_max_attempts, compensation_attempts
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

-- name: jobs_stats_flow_held
-- Of jobs_stats's runnable jobs, those only a flow key keeps from starting now, and the
-- oldest runnable age without them (tickq.jobs_flow_held; no rows without flow limits or
-- holds).
select queue, type, status, held, oldest_unheld_seconds
from tickq.jobs_flow_held(%(now)s::timestamptz);

-- name: operator_group_stats
-- jobs_stats_groups across every user, through the one function tickq_operator may call.
select queue, group_key, waiting, running, oldest_runnable_seconds
from tickq.operator_group_stats(%(now)s::timestamptz);

-- name: operator_stats
-- jobs_stats across every user, through the one function tickq_operator may call.
select queue, type, status, count, oldest_runnable_seconds, suspended
from tickq.operator_stats(%(now)s::timestamptz);

-- name: clock_now
-- The database clock, for shells that must agree with the store on "now".
select now();

-- name: jobs_stats_groups
-- Per queue and group: jobs waiting (runnable now), running, and the age of the oldest
-- runnable job; only groups with live jobs (tickq.jobs_group_stats, whose body the
-- operator's group counts share).
select queue, group_key, waiting, running, oldest_runnable_seconds
from tickq.jobs_group_stats(%(now)s::timestamptz)
order by queue, group_key;

-- name: job_relatives
-- A job's parents and children with their type and status, for `tickq show` and the API.
select relation, id, type, status from tickq.job_relatives(%(id)s::uuid);

-- name: job_flow_waits
-- The flow key a job waits for (tickq.flow_job_waits), for its views; null when none.
select tickq.flow_job_waits(%(id)s::uuid);
