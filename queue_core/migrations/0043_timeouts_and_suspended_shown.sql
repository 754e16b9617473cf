-- What remains of timeouts: SQL's tickq.enqueue takes a `timeout` by name, as its
-- enqueue_many takes the request field (a new parameter: the function is made again, its
-- grants with it), and the operator's job view returns the job's timeout. And suspended jobs
-- shown as such: the operator's list returns each job's wait_kind, and the operator's
-- counts how many queued jobs are suspended (not runnable depth).

drop function tickq.enqueue(text, jsonb, text, text, integer, timestamptz, integer, text, text,
                            double precision, double precision, text, double precision);

-- Enqueue one job from SQL: from a trigger in the caller's transaction, a PostgREST or
-- Supabase RPC, or any language with a PostgreSQL driver. Returns the job's id; with an
-- idempotency key a live or succeeded job of the same owner holds, the holder's id; with a
-- debounce or throttle (debounce_key, debounce_seconds[, debounce_max_seconds];
-- throttle_key, throttle_seconds) whose key's job took the enqueue, that job's id
-- (tickq.job_gate says which; neither goes with an idempotency key or the other, nor a
-- debounce with run_after). `timeout`: seconds its handler may run before the runner stops
-- it (1 to 43200, else the task's), the lease raised to at least it plus a margin.
--
-- The request is checked and written by tickq.enqueue_job, the body of every SQL enqueue:
-- each refusal is SQLSTATE 22023 (invalid_parameter_value) with the parameter as the error's
-- column name, before anything is written. Who the job belongs to is the transaction's user
-- (tickq.current_user_id(), set with set_config('tickq.user_id', ..., true)):
-- * With a user: the enqueue is tickq.enqueue_many's (the only write the application login
--   has), so the job is that user's, on the database's clock, admitted by its insert's
--   trigger (jobs_app_admit); its group is "<user>/<group_key>" (default: the user), a
--   run_after in the past becomes now. A full queue is SQLSTATE TQ429.
-- * Without one: only a trusted role (a worker, tickq_worker, or the tables' owner) may
--   enqueue, and the job has no owner, its group is group_key as given (default ''), and
--   the queue's depth limit is checked (tickq.queue_admit), as the Python store does for a
--   worker's enqueue. An application role without a user is SQLSTATE 42501.
--
-- What the call leaves out (null) comes from the task catalogue (tickq.task_catalog), then
-- from the defaults: queue 'default', priority 0, max_attempts 3.
--
-- Security invoker: a caller without a user enqueues with its own rights.
create function tickq.enqueue(
    type text,
    payload jsonb default '{}',
    queue text default null,
    idempotency_key text default null,
    priority integer default null,
    run_after timestamptz default null,
    max_attempts integer default null,
    group_key text default null,
    debounce_key text default null,
    debounce_seconds double precision default null,
    debounce_max_seconds double precision default null,
    throttle_key text default null,
    throttle_seconds double precision default null,
    timeout integer default null
) returns uuid
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_owner uuid := tickq.current_user_id();
    v_bad   record;
    v_job   jsonb;
    v_id    uuid;
    -- A refusal names this function's parameters, not a request's fields.
    v_names constant jsonb := '{"group": "group_key", "debounce": "debounce_key",
        "debounce.key": "debounce_key", "debounce.seconds": "debounce_seconds",
        "debounce.max_seconds": "debounce_max_seconds", "throttle": "throttle_key",
        "throttle.key": "throttle_key", "throttle.seconds": "throttle_seconds"}';
begin
    if v_owner is null
       and not pg_has_role('tickq_worker', 'USAGE')
       and not pg_has_role((select c.relowner from pg_class c
                            where c.oid = 'tickq.jobs'::regclass), 'USAGE') then
        raise exception 'tickq: an application''s enqueue needs the transaction''s user'
            using errcode = 'insufficient_privilege',
                  hint = 'select set_config(''tickq.user_id'', <user uuid>, true) first';
    end if;
    -- This function's own parameters: group_key (a request's "group"), and the gate's
    -- parts, which a request gives as one object.
    if enqueue.group_key is not null
       and (char_length(enqueue.group_key) not between 1 and 128
            or enqueue.group_key collate "C" !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]*$') then
        raise exception 'tickq: group_key must be 1-128 characters of letters, digits and '
                        '_.:/- starting with a letter or digit, got %',
            quote_literal(left(enqueue.group_key, 60))
            using errcode = 'invalid_parameter_value', column = 'group_key';
    end if;
    if v_owner is not null and char_length(v_owner::text || '/' || enqueue.group_key) > 128 then
        raise exception 'tickq: group_key is % characters with its owner''s prefix, over the '
                        'limit of 128', char_length(v_owner::text || '/' || enqueue.group_key)
            using errcode = 'invalid_parameter_value', column = 'group_key';
    end if;
    if enqueue.debounce_key is null and enqueue.throttle_key is null
       and coalesce(enqueue.debounce_seconds, enqueue.debounce_max_seconds,
                    enqueue.throttle_seconds) is not null then
        raise exception 'tickq: debounce_seconds, debounce_max_seconds and throttle_seconds '
                        'need their debounce_key or throttle_key'
            using errcode = 'invalid_parameter_value', column = 'debounce_key';
    end if;
    if not isfinite(enqueue.run_after) then
        raise exception 'tickq: run_after must be a finite time, got %', enqueue.run_after
            using errcode = 'invalid_parameter_value', column = 'run_after';
    end if;
    v_job := jsonb_build_object(
        'type', enqueue.type, 'payload', enqueue.payload, 'queue', enqueue.queue,
        'idempotency_key', enqueue.idempotency_key, 'priority', enqueue.priority,
        'run_after', enqueue.run_after, 'max_attempts', enqueue.max_attempts,
        'group', enqueue.group_key,
        'debounce', case when enqueue.debounce_key is not null then jsonb_build_object(
            'key', enqueue.debounce_key, 'seconds', enqueue.debounce_seconds,
            'max_seconds', enqueue.debounce_max_seconds) end,
        'throttle', case when enqueue.throttle_key is not null then jsonb_build_object(
            'key', enqueue.throttle_key, 'seconds', enqueue.throttle_seconds) end,
        'timeout', enqueue.timeout);
    if v_owner is not null then
        select e.id into v_id from tickq.enqueue_many(jsonb_build_array(v_job), v_names) e;
    else
        select e.id into v_id from tickq.enqueue_job(null, v_job, '{}', null, v_names) e;
    end if;
    return v_id;
end $$;

revoke all on function tickq.enqueue(text, jsonb, text, text, integer, timestamptz, integer,
                                     text, text, double precision, double precision, text,
                                     double precision, integer) from public;
grant execute on function tickq.enqueue(text, jsonb, text, text, integer, timestamptz,
                                        integer, text, text, double precision,
                                        double precision, text, double precision, integer)
    to tickq_app, tickq_worker;

drop function tickq.operator_job(uuid);

-- One job of any user for the operator's detail view: operator_jobs' columns, the error
-- history and the job's timeout, never the payload or result.
create function tickq.operator_job(p_id uuid)
    returns table (id uuid, queue text, type text, user_id uuid, group_key text,
                   status text, attempts integer, max_attempts integer, priority integer,
                   progress jsonb, error text, errors jsonb, run_after timestamptz,
                   lease_until timestamptz, created_at timestamptz, updated_at timestamptz,
                   started_at timestamptz, finished_at timestamptz, timeout_seconds integer)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select j.id, j.queue, j.type, j.user_id, j.group_key, j.status, j.attempts, j.max_attempts,
       j.priority, j.progress, j.error, j.errors, j.run_after, j.lease_until, j.created_at,
       j.updated_at, j.started_at, j.finished_at, j.timeout_seconds
from tickq.jobs j
where j.id = p_id
$$;

revoke all on function tickq.operator_job(uuid) from public;
grant execute on function tickq.operator_job(uuid) to tickq_operator, tickq_worker;

drop function tickq.operator_stats(timestamptz);

-- Operators: counts across every user, nothing else. A login in tickq_operator (the API's,
-- so /admin/stats works) can call this function and touch no row. `suspended`: of the
-- queued, those queued with a wait (a durable job's suspension), which are not runnable.
create function tickq.operator_stats(p_now timestamptz)
    returns table (queue text, type text, status text, count bigint,
                   oldest_runnable_seconds double precision, suspended bigint)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select j.queue, j.type, j.status, count(*),
       extract(epoch from coalesce(p_now, now())
               - min(j.run_after) filter (
                   where j.status in ('queued', 'retrying')
                     and j.run_after <= coalesce(p_now, now())))::double precision,
       count(*) filter (where j.status = 'queued' and j.wait_kind is not null)
from tickq.jobs j
group by j.queue, j.type, j.status
order by j.queue, j.type, j.status
$$;

revoke all on function tickq.operator_stats(timestamptz) from public;
grant execute on function tickq.operator_stats(timestamptz) to tickq_operator;

drop function tickq.operator_jobs(text[], text[], text[], text[], text, timestamptz, timestamptz,
                                  timestamptz, uuid, integer);

-- Every user's jobs for the operator list: what identifies a job and how it went, never
-- its payload or result. Newest first, a page after the (created_at, id) cursor. As every
-- list of jobs, it leaves out a large progress (null, tickq.list_left_out) and cuts the
-- error to its first 200 characters (LIST_ERROR_CHARS in queue_core/pages.py); `truncated`
-- names what it left out or cut, each with the bytes it holds ({} when nothing). The page's
-- rows are chosen first, so only they are measured. `wait_kind`: what a suspended job
-- (queued with a wait) waits for, so the list shows it suspended.
create function tickq.operator_jobs(
    p_statuses text[], p_types text[], p_queues text[], p_groups text[], p_error text,
    p_created_from timestamptz, p_created_to timestamptz,
    p_after_created timestamptz, p_after_id uuid, p_limit integer)
    returns table (id uuid, queue text, type text, user_id uuid, group_key text, status text,
                   attempts integer, max_attempts integer, priority integer,
                   progress jsonb, error text, run_after timestamptz,
                   created_at timestamptz, updated_at timestamptz, finished_at timestamptz,
                   truncated jsonb, wait_kind text)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select j.id, j.queue, j.type, j.user_id, j.group_key, j.status, j.attempts, j.max_attempts,
       j.priority, case when b.progress is null then j.progress end, left(j.error, 200),
       j.run_after, j.created_at, j.updated_at, j.finished_at,
       jsonb_strip_nulls(jsonb_build_object('progress', b.progress, 'error', b.error)),
       j.wait_kind
from (select j.id, j.queue, j.type, j.user_id, j.group_key, j.status, j.attempts,
             j.max_attempts, j.priority, j.progress, j.error, j.run_after, j.created_at,
             j.updated_at, j.finished_at, j.wait_kind
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
      limit p_limit) j
cross join lateral (
    select tickq.list_left_out(j.progress) as progress,
           case when char_length(j.error) > 200 then octet_length(j.error) end as error) b
order by j.created_at desc, j.id desc
$$;

revoke all on function tickq.operator_jobs(text[], text[], text[], text[], text, timestamptz,
                                           timestamptz, timestamptz, uuid, integer) from public;
grant execute on function tickq.operator_jobs(text[], text[], text[], text[], text, timestamptz,
                                              timestamptz, timestamptz, uuid, integer)
    to tickq_operator, tickq_worker;
