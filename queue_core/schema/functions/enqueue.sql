-- Enqueue one job from SQL: from a trigger in the caller's transaction, a PostgREST or
-- Supabase RPC, or any language with a PostgreSQL driver. Returns the job's id; with an
-- idempotency key a live or succeeded job of the same owner holds, the holder's id; with a
-- debounce or throttle (debounce_key, debounce_seconds[, debounce_max_seconds];
-- throttle_key, throttle_seconds) whose key's job took the enqueue, that job's id
-- (tickq.job_gate says which; neither goes with an idempotency key or the other, nor a
-- debounce with run_after). `timeout`: seconds its handler may run before the runner stops
-- it (1 to 43200, else the task's), the lease raised to at least it plus a margin.
-- `flow_keys`: the job's own flow keys (a user's stored under it), besides those its task's
-- templates give.
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
create or replace function tickq.enqueue(
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
    timeout integer default null,
    flow_keys text[] default null
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
        'timeout', enqueue.timeout,
        'flow_keys', to_jsonb(enqueue.flow_keys));
    if v_owner is not null then
        select e.id into v_id from tickq.enqueue_many(jsonb_build_array(v_job), v_names) e;
    else
        select e.id into v_id from tickq.enqueue_job(null, v_job, '{}', null, v_names) e;
    end if;
    return v_id;
end $$;

-- Enqueue from SQL (a trigger, an RPC, another language): applications and workers. It
-- runs with the caller's own rights: a user's enqueue goes on through tickq.enqueue_many.
revoke all on function tickq.enqueue(text, jsonb, text, text, integer, timestamptz, integer, text, text, double precision, double precision, text, double precision, integer, text[]) from public;
grant execute on function tickq.enqueue(text, jsonb, text, text, integer, timestamptz, integer, text, text, double precision, double precision, text, double precision, integer, text[]) to tickq_app, tickq_worker;
