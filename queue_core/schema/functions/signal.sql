-- An application user sends the signal `name` to one of its own live jobs: kept for it, and
-- waking it when it waits for that name (tickq.job_signals_send). The owner is the
-- transaction's user and the time the database's. Returns whether it woke the job. Refused,
-- writing nothing: without a user (SQLSTATE 42501), a job that is not this user's or does not
-- exist (P0002), a finished job (TQ410), a bad name or payload, a name already sent, more
-- signals or signal bytes than a job holds (22023, the column naming the field).
create or replace function tickq.signal(job_id uuid, name text, payload jsonb default null)
    returns boolean
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    b        constant jsonb := tickq.enqueue_bounds();
    v_owner  uuid := tickq.app_user('signal');
    v_body   jsonb := coalesce(signal.payload, 'null');
    v_size   integer;
    v_sent   record;
begin
    if char_length(signal.name) is null
       or char_length(signal.name) not between 1 and (b ->> 'max_name')::integer then
        raise exception 'tickq: signal name must be 1-% characters long', b ->> 'max_name'
            using errcode = 'invalid_parameter_value', column = 'name';
    end if;
    v_size := octet_length(v_body::text);
    if v_size > (b ->> 'max_signal_bytes')::integer then
        raise exception 'tickq: signal payload is % bytes, over the limit of %', v_size,
            b ->> 'max_signal_bytes'
            using errcode = 'invalid_parameter_value', column = 'payload';
    end if;
    if jsonb_path_exists(
           v_body, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")') then
        raise exception 'tickq: signal payload is nested too deeply (more than % arrays and '
                        'objects)', b ->> 'max_json_depth'
            using errcode = 'invalid_parameter_value', column = 'payload';
    end if;
    if not exists (select from tickq.jobs j
                   where j.id = signal.job_id and j.user_id = v_owner) then
        raise exception 'tickq: job % not found', signal.job_id
            using errcode = 'no_data_found', column = 'job_id', detail = signal.job_id::text;
    end if;
    select s.* into v_sent
    from tickq.job_signals_send(signal.job_id, signal.name, v_body, v_size,
                                (b ->> 'max_signal_bytes')::integer,
                                (b ->> 'max_signals')::integer, now()) s;
    if v_sent.status in ('succeeded', 'dead', 'cancelled') then
        raise exception 'tickq: cannot signal % to job %: it is %', quote_literal(signal.name),
            signal.job_id, v_sent.status
            using errcode = 'TQ410', column = 'job_id', detail = signal.job_id::text,
                  hint = v_sent.status;
    end if;
    if not v_sent.kept and not v_sent.taken
       and v_sent.held >= (b ->> 'max_signals')::integer then
        raise exception 'tickq: a job holds at most % signals', b ->> 'max_signals'
            using errcode = 'invalid_parameter_value', column = 'signal';
    end if;
    if v_sent.taken
       or (not v_sent.kept
           and v_sent.bytes + v_size <= (b ->> 'max_signal_bytes')::integer) then
        raise exception 'tickq: % was already sent to job %', quote_literal(signal.name),
            signal.job_id
            using errcode = 'invalid_parameter_value', column = 'signal';
    end if;
    if not v_sent.kept then
        raise exception 'tickq: the job''s signals would hold % bytes, over the limit of %',
            v_sent.bytes + v_size, b ->> 'max_signal_bytes'
            using errcode = 'invalid_parameter_value', column = 'signal';
    end if;
    return v_sent.woke;
end $$;

-- The application login's whole write surface: these security-definer functions, each
-- taking the owner from the session and the time from the database and checking every
-- argument (docs/threat-model.md lists them with their bounds). Workers may call them too.
revoke all on function tickq.signal(uuid, text, jsonb) from public;
grant execute on function tickq.signal(uuid, text, jsonb) to tickq_app, tickq_worker;
