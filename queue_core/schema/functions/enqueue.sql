-- Enqueue one job from SQL: from a trigger in the caller's transaction, a PostgREST or
-- Supabase RPC, or any language with a PostgreSQL driver. Returns the job's id; with an
-- idempotency key a live or succeeded job of the same owner holds, the holder's id; with a
-- debounce or throttle (debounce_key, debounce_seconds[, debounce_max_seconds];
-- throttle_key, throttle_seconds) whose key's job took the enqueue, that job's id
-- (tickq.job_gate says which; neither goes with an idempotency key or the other, nor a
-- debounce with run_after).
--
-- The checks are the Python enqueue's (queue_core/validation.py), each refusal SQLSTATE
-- 22023 (invalid_parameter_value) with the parameter as the error's column name, before
-- anything is written. Who the job belongs to is the transaction's user
-- (tickq.current_user_id(), set with set_config('tickq.user_id', ..., true)):
-- * With a user (an application, tickq_app): the job is that user's, row-level security
--   and the insert's own admission trigger (jobs_app_admit) apply as to the API's inserts,
--   its group is "<user>/<group_key>" (default: the user), a run_after in the past becomes
--   now. A full queue is SQLSTATE TQ429.
-- * Without one: only a trusted role (a worker, tickq_worker, or the tables' owner) may
--   enqueue, and the job has no owner, its group is group_key as given (default ''), and
--   the queue's depth limit is checked here (tickq.queue_admit), as the Python store does
--   for a worker's enqueue. An application role without a user is SQLSTATE 42501.
--
-- Security invoker: the caller's own grants and row-level security decide what it may do.
-- The key is taken before the job goes in, as tickq's enqueue statements do, so a held key
-- answers with its holder instead of failing; the insert's key trigger (jobs_key_insert)
-- then finds it held by this job.
create function tickq.enqueue(
    type text,
    payload jsonb default '{}',
    queue text default 'default',
    idempotency_key text default null,
    priority integer default 0,
    run_after timestamptz default null,
    max_attempts integer default null,
    group_key text default null,
    debounce_key text default null,
    debounce_seconds double precision default null,
    debounce_max_seconds double precision default null,
    throttle_key text default null,
    throttle_seconds double precision default null
) returns uuid
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_owner    uuid := tickq.current_user_id();
    v_queue    text := coalesce(enqueue.queue, 'default');
    v_payload  jsonb := coalesce(enqueue.payload, '{}'::jsonb);
    v_attempts integer := coalesce(enqueue.max_attempts, 3);
    v_run      timestamptz := enqueue.run_after;
    v_group    text;
    v_bad      record;
    v_id       uuid := gen_random_uuid();
    v_holder   uuid;
    v_kind     text;
    v_gated    record;
begin
    if v_owner is null
       and not pg_has_role('tickq_worker', 'USAGE')
       and not pg_has_role((select c.relowner from pg_class c
                            where c.oid = 'tickq.jobs'::regclass), 'USAGE') then
        raise exception 'tickq: an application''s enqueue needs the transaction''s user'
            using errcode = 'insufficient_privilege',
                  hint = 'select set_config(''tickq.user_id'', <user uuid>, true) first';
    end if;
    -- Names: the type, the queue and the group (validation.NAME_RE, MAX_NAME).
    for v_bad in
        select n.field, n.value
        from (values ('type', enqueue.type), ('queue', v_queue),
                     ('group_key', enqueue.group_key)) as n (field, value)
        where (n.value is not null or n.field = 'type')
          and (n.value is null or char_length(n.value) not between 1 and 128
               or n.value collate "C" !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]*$')
    loop
        raise exception 'tickq: % must be 1-128 characters of letters, digits and _.:/- '
                        'starting with a letter or digit, got %',
            v_bad.field, coalesce(quote_literal(left(v_bad.value, 60)), 'null')
            using errcode = 'invalid_parameter_value', column = v_bad.field;
    end loop;
    if jsonb_typeof(v_payload) <> 'object' then
        raise exception 'tickq: payload must be a JSON object, got %', jsonb_typeof(v_payload)
            using errcode = 'invalid_parameter_value', column = 'payload';
    end if;
    if octet_length(v_payload::text) > 262144 then
        raise exception 'tickq: payload is % bytes, over the limit of 262144',
            octet_length(v_payload::text)
            using errcode = 'invalid_parameter_value', column = 'payload';
    end if;
    if char_length(enqueue.idempotency_key) not between 1 and 255 then
        raise exception 'tickq: idempotency_key must be 1-255 characters long'
            using errcode = 'invalid_parameter_value', column = 'idempotency_key';
    end if;
    if v_attempts not between 1 and 1000 then
        raise exception 'tickq: max_attempts must be between 1 and 1000, got %', v_attempts
            using errcode = 'invalid_parameter_value', column = 'max_attempts';
    end if;
    if not isfinite(v_run) then
        raise exception 'tickq: run_after must be a finite time, got %', v_run
            using errcode = 'invalid_parameter_value', column = 'run_after';
    end if;
    if enqueue.debounce_key is not null and enqueue.throttle_key is not null then
        raise exception 'tickq: give either debounce or throttle, not both'
            using errcode = 'invalid_parameter_value', column = 'throttle_key';
    end if;
    v_kind := case when enqueue.debounce_key is not null then 'debounce'
                   when enqueue.throttle_key is not null then 'throttle' end;
    if v_kind is null and coalesce(enqueue.debounce_seconds, enqueue.debounce_max_seconds,
                                   enqueue.throttle_seconds) is not null then
        raise exception 'tickq: debounce_seconds, debounce_max_seconds and throttle_seconds '
                        'need their debounce_key or throttle_key'
            using errcode = 'invalid_parameter_value', column = 'debounce_key';
    end if;
    if v_kind is not null and enqueue.idempotency_key is not null then
        raise exception 'tickq: % cannot be combined with idempotency_key: each decides which '
                        'job requests land on', v_kind
            using errcode = 'invalid_parameter_value', column = v_kind || '_key';
    end if;
    if v_kind = 'debounce' and enqueue.run_after is not null then
        raise exception 'tickq: debounce cannot be combined with run_after: the debounce sets '
                        'when its job runs'
            using errcode = 'invalid_parameter_value', column = 'debounce_key';
    end if;
    if v_owner is null then
        v_group := coalesce(enqueue.group_key, '');
        for v_bad in select a.max_depth from tickq.queue_admit(array[v_queue], array[1]) a loop
            raise exception 'tickq: queue % is full', v_queue
                using errcode = 'TQ429', detail = v_queue, hint = v_bad.max_depth::text;
        end loop;
    else
        v_group := v_owner::text || coalesce('/' || enqueue.group_key, '');
        if v_run < now() then
            v_run := null;
        end if;
        if char_length(v_group) > 128 then
            raise exception 'tickq: group_key is % characters with its owner''s prefix, over '
                            'the limit of 128', char_length(v_group)
                using errcode = 'invalid_parameter_value', column = 'group_key';
        end if;
    end if;
    if v_kind is not null and v_owner is not null then
        select g.job_id, g.outcome, g.run_after into v_gated
        from tickq.job_gate_app(v_kind, coalesce(enqueue.debounce_key, enqueue.throttle_key),
                                coalesce(enqueue.debounce_seconds, enqueue.throttle_seconds),
                                enqueue.debounce_max_seconds, v_payload, v_id) g;
    elsif v_kind is not null then
        select g.job_id, g.outcome, g.run_after into v_gated
        from tickq.job_gate(v_kind, coalesce(enqueue.debounce_key, enqueue.throttle_key),
                            null, coalesce(enqueue.debounce_seconds, enqueue.throttle_seconds),
                            enqueue.debounce_max_seconds, v_payload, null, v_id) g;
    end if;
    if v_kind is not null then
        if v_gated.outcome <> 'created' then
            return v_gated.job_id;
        end if;
        v_run := coalesce(v_gated.run_after, v_run);
    end if;
    -- A key's holder that commits between the key's insert and its lookup, or lets go of
    -- the key meanwhile, makes the enqueue go again, as the Python store does.
    for v_round in 1..10 loop
        if enqueue.idempotency_key is not null then
            insert into tickq.job_keys (idempotency_key, user_id, job_id)
            values (enqueue.idempotency_key, v_owner, v_id)
            on conflict do nothing;
            if not found then
                select j.id into v_holder
                from tickq.job_keys k join tickq.jobs j on j.id = k.job_id
                where k.idempotency_key = enqueue.idempotency_key
                  and k.user_id is not distinct from v_owner;
                if found then
                    return v_holder;
                end if;
                continue;
            end if;
        end if;
        insert into tickq.jobs (id, queue, type, user_id, payload, idempotency_key,
                                max_attempts, priority, run_after, group_key)
        values (v_id, v_queue, enqueue.type, v_owner, v_payload, enqueue.idempotency_key,
                v_attempts, coalesce(enqueue.priority, 0), coalesce(v_run, now()), v_group);
        return v_id;
    end loop;
    raise exception 'tickq: enqueue of key % did not settle after 10 rounds of key conflicts',
        enqueue.idempotency_key
        using errcode = 'serialization_failure';
end $$;
