-- The application role no longer executes tickq.job_gate, which takes an owner and a
-- clock as arguments: a login that named no user could pass another owner and rewrite
-- that owner's debounced payload, or pass a clock of -infinity that later broke claims and
-- the operator list. Applications' gated enqueues (the API's, tickq.enqueue with a user)
-- go through tickq.job_gate_app, which takes the owner from the session, the time from
-- the database, and refuses without a user. tickq.job_gate refuses a clock the engine
-- cannot read. A gate row goes with its job: at commit, the job it names exists, live,
-- with its owner (a constraint trigger), so no gated enqueue leaves a gate row behind or
-- plants one on another owner's job.

create or replace function tickq.job_gate(
    p_kind text,
    p_key text,
    p_owner uuid,
    p_seconds double precision,
    p_max_seconds double precision,
    p_payload jsonb,
    p_now timestamptz,
    p_new_id uuid,
    out job_id uuid,
    out outcome text,
    out run_after timestamptz
) returns record
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_user   uuid := tickq.current_user_id();
    v_owner  uuid := coalesce(v_user, p_owner);
    v_now    timestamptz := coalesce(p_now, now());
    v_gate   record;
    v_run    timestamptz;
begin
    if v_user is not null and p_owner is distinct from v_user and p_owner is not null then
        raise exception 'tickq: a gate''s owner is the transaction''s user'
            using errcode = 'insufficient_privilege';
    end if;
    if not (isfinite(v_now) and v_now >= '0001-01-01 00:00:00+00'
            and v_now < '9000-01-01 00:00:00+00') then
        raise exception 'tickq: a gate''s clock must be a finite time of the years 1-8999, got %',
            v_now
            using errcode = 'invalid_parameter_value', column = 'now';
    end if;
    if p_kind is null or p_kind not in ('debounce', 'throttle') then
        raise exception 'tickq: a gate is debounce or throttle, got %',
            coalesce(quote_literal(p_kind), 'null')
            using errcode = 'invalid_parameter_value', column = 'kind';
    end if;
    if p_key is null or char_length(p_key) not between 1 and 255 then
        raise exception 'tickq: %.key must be 1-255 characters long', p_kind
            using errcode = 'invalid_parameter_value', column = p_kind || '_key';
    end if;
    if p_seconds is null or not (p_seconds > 0 and p_seconds <= 366 * 86400) then
        raise exception 'tickq: %.seconds must be more than 0 and at most 31622400, got %',
            p_kind, coalesce(p_seconds::text, 'null')
            using errcode = 'invalid_parameter_value', column = p_kind || '_seconds';
    end if;
    if p_max_seconds is not null
       and (p_kind = 'throttle' or not (p_max_seconds >= p_seconds
                                        and p_max_seconds <= 366 * 86400)) then
        raise exception 'tickq: debounce.max_seconds must be at least seconds (%) and at most '
                        '31622400, got %', p_seconds, p_max_seconds
            using errcode = 'invalid_parameter_value', column = p_kind || '_max_seconds';
    end if;
    if jsonb_typeof(p_payload) is distinct from 'object' then
        raise exception 'tickq: payload must be a JSON object'
            using errcode = 'invalid_parameter_value', column = 'payload';
    end if;
    perform pg_advisory_xact_lock(
        hashtextextended(p_kind || '/' || coalesce(v_owner::text, '') || '/' || p_key, 0));
    select g.job_id, g.first_at into v_gate
    from tickq.job_gates g
    where g.kind = p_kind and g.gate_key = p_key
      and coalesce(g.user_id, '00000000-0000-0000-0000-000000000000'::uuid)
          = coalesce(v_owner, '00000000-0000-0000-0000-000000000000'::uuid)
    order by g.first_at desc
    limit 1;
    if found then
        if p_kind = 'debounce' then
            -- least() skips a null bound. Not started: queued with no start; a job a claim
            -- holds locked is waited for, then seen running, so it is left alone.
            v_run := least(v_now + p_seconds * interval '1 second',
                           v_gate.first_at + p_max_seconds * interval '1 second');
            update tickq.jobs j
            set payload = p_payload, run_after = v_run, updated_at = v_now
            where j.id = v_gate.job_id and j.user_id is not distinct from v_owner
              and j.status = 'queued' and j.started_at is null;
            if found then
                update tickq.job_gates g set enqueues = g.enqueues + 1
                where g.job_id = v_gate.job_id;
                job_id := v_gate.job_id;
                outcome := 'debounced';
                run_after := v_run;
                return;
            end if;
        elsif v_now < v_gate.first_at + p_seconds * interval '1 second'
              and exists (select from tickq.jobs j
                          where j.id = v_gate.job_id and j.user_id is not distinct from v_owner)
        then
            update tickq.job_gates g set enqueues = g.enqueues + 1
            where g.job_id = v_gate.job_id;
            job_id := v_gate.job_id;
            outcome := 'throttled';
            return;
        end if;
    end if;
    insert into tickq.job_gates (job_id, kind, gate_key, user_id, first_at)
    values (p_new_id, p_kind, p_key, v_owner, v_now);
    job_id := p_new_id;
    outcome := 'created';
    if p_kind = 'debounce' then
        run_after := v_now + p_seconds * interval '1 second';
    end if;
end $$;

create function tickq.job_gate_app(
    p_kind text,
    p_key text,
    p_seconds double precision,
    p_max_seconds double precision,
    p_payload jsonb,
    p_new_id uuid,
    out job_id uuid,
    out outcome text,
    out run_after timestamptz
) returns record
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_user uuid := tickq.current_user_id();
begin
    if v_user is null then
        raise exception 'tickq: an application''s gated enqueue needs the transaction''s user'
            using errcode = 'insufficient_privilege',
                  hint = 'select set_config(''tickq.user_id'', <user uuid>, true) first';
    end if;
    select g.job_id, g.outcome, g.run_after into job_id, outcome, run_after
    from tickq.job_gate(p_kind, p_key, v_user, p_seconds, p_max_seconds, p_payload, null,
                        p_new_id) g;
end $$;

create or replace function tickq.enqueue(
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

create function tickq.job_gates_have_jobs() returns trigger
    language plpgsql
    set search_path = pg_catalog, pg_temp
    as $$
begin
    if not exists (select from tickq.jobs j
                   where j.id = new.job_id
                     and j.status in ('waiting', 'queued', 'running', 'retrying')
                     and j.user_id is not distinct from new.user_id) then
        raise exception 'tickq: a gate''s job % was not enqueued by its owner', new.job_id
            using errcode = 'foreign_key_violation';
    end if;
    return null;
end $$;

create constraint trigger job_gates_have_jobs after insert on tickq.job_gates
    deferrable initially deferred
    for each row execute function tickq.job_gates_have_jobs();

revoke execute on function tickq.job_gate(text, text, uuid, double precision,
                                          double precision, jsonb, timestamptz, uuid)
    from tickq_app;
revoke all on function tickq.job_gate_app(text, text, double precision, double precision,
                                          jsonb, uuid) from public;
grant execute on function tickq.job_gate_app(text, text, double precision, double precision,
                                             jsonb, uuid) to tickq_app, tickq_worker;
revoke all on function tickq.job_gates_have_jobs() from public;
