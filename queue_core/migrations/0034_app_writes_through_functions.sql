-- The application login writes only through functions. tickq_app keeps SELECT under
-- row-level security and loses every INSERT, UPDATE and DELETE on the tables of schema
-- tickq: its whole write surface is tickq.enqueue_many, tickq.cancel, tickq.retry,
-- tickq.signal and tickq.publish (and tickq.enqueue, which goes through enqueue_many for a
-- user), security-definer functions that take the owner from the session and the time from
-- the database, check every argument and write nothing when they refuse. What they run, and
-- every function that takes an owner or a clock, is the workers' alone; tickq.job_gate_app,
-- a wrapper for one hole, goes.
--
-- Ids are unique across every partition, whoever inserts (tickq.job_ids), and never change;
-- the application cannot choose one (its enqueues make them). Settlements are written only
-- by the statements that finish parents and are worked off oldest first. A gate key's turn
-- is a row of a table no other login may touch, not an advisory lock any login may take.

-- Every job's id, once.
create table tickq.job_ids (
    id uuid primary key
);
-- Ids that two jobs already share (written before this) stay with the first taker.
insert into tickq.job_ids (id) select j.id from tickq.jobs j on conflict do nothing;

-- A gate key's turn (tickq.job_gate): empty at rest.
create table tickq.job_gate_turns (
    kind     text not null,
    gate_key text not null,
    owner    uuid not null,  -- the nil uuid for a worker's ownerless enqueue
    primary key (kind, owner, gate_key)
);

-- Worked off oldest first (tickq.jobs_settle_pending).
create index job_settlements_created_idx on tickq.job_settlements (created_at, parent_id);

-- The transaction's user for one of the application login's functions (tickq.enqueue_many,
-- tickq.cancel, tickq.retry, tickq.signal): the owner of everything it touches, taken from
-- the session, never from an argument. Refuses (SQLSTATE 42501) when no user is named.
create function tickq.app_user(p_action text) returns uuid
    language plpgsql stable
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_user uuid := tickq.current_user_id();
begin
    if v_user is null then
        raise exception 'tickq: an application''s % needs the transaction''s user', p_action
            using errcode = 'insufficient_privilege',
                  hint = 'select set_config(''tickq.user_id'', <user uuid>, true) first';
    end if;
    return v_user;
end $$;

-- The bounds an enqueue request is checked against, written once for SQL: every enqueue of
-- the SQL surface (tickq.enqueue, tickq.enqueue_many and through it the HTTP API's) reads
-- them here. The Python checks (queue_core/validation.py) name the same numbers, and
-- tests/security/test_app_write_surface.py holds the two equal.
create function tickq.enqueue_bounds() returns jsonb
    language sql immutable parallel safe
    as $$
    select jsonb_build_object(
        'max_name', 128,                  -- type, queue, group: characters
        'max_key', 255,                   -- idempotency keys, debounce and throttle keys
        'max_payload_bytes', 262144,      -- a payload as JSON text
        'max_json_depth', 64,             -- arrays and objects nested in a JSON value
        'max_attempts', 1000,
        'max_priority', 2147483647,       -- a priority is a 32-bit integer, either sign
        'max_lease_seconds', 43200,
        'max_delay_seconds', 31622400,    -- 366 days: delay, run_after ahead, gate seconds
        'max_backoff_base', 86400,
        'min_backoff_factor', 1,
        'max_backoff_factor', 100,
        'max_backoff_max', 604800,
        'max_parents', 100,
        'max_batch', 1000,                -- requests of one tickq.enqueue_many call
        'max_signal_bytes', 65536,        -- all of one job's signal payloads together
        'max_signals', 100,
        'max_detail_type', 128,           -- an outbox event's detail-type: characters
        'max_source', 256,                -- an outbox event's source: characters
        'max_detail_bytes', 200000        -- an outbox event's detail as JSON text
    )
$$;

-- The refusal of tickq.request_number: a value that is no number of the field's range.
create function tickq.request_bad_number(
    p_value jsonb,
    p_field text,
    p_low double precision,
    p_high double precision,
    p_integer boolean,
    p_where text,
    p_column text
) returns double precision
    language plpgsql immutable
    set search_path = pg_catalog, pg_temp
    as $$
begin
    raise exception 'tickq: % must be % between % and %, got %', p_where || p_field,
        case when p_integer then 'an integer' else 'a number' end, p_low, p_high,
        left(p_value::text, 60)
        using errcode = 'invalid_parameter_value', column = p_column;
end $$;

-- A number of an enqueue request (tickq.enqueue_job): null when the field is missing or JSON
-- null, else a JSON number in [p_low, p_high], whole when p_integer; anything else is
-- refused (tickq.request_bad_number) with SQLSTATE 22023 naming the field (p_column, default
-- the field itself). A SQL function, so a caller's expression inlines it: a bulk enqueue
-- reads several numbers of every request.
create function tickq.request_number(
    p_object jsonb,
    p_field text,
    p_low double precision,
    p_high double precision,
    p_integer boolean,
    p_where text,
    p_column text default null
) returns double precision
    language sql immutable
    as $$
    select case
        when coalesce(jsonb_typeof(p_object -> p_field), 'null') = 'null' then null
        when jsonb_typeof(p_object -> p_field) = 'number'
             and (p_object -> p_field)::numeric between p_low::numeric and p_high::numeric
             and (not p_integer
                  or (p_object -> p_field)::numeric = trunc((p_object -> p_field)::numeric))
        then (p_object -> p_field)::numeric::double precision
        else tickq.request_bad_number(p_object -> p_field, p_field, p_low, p_high, p_integer,
                                   p_where, coalesce(p_column, p_field))
    end
$$;

-- A new job's id when the database makes it (the application login's enqueues, which may not
-- choose one): a UUIDv7 (RFC 9562) as the Python store's queue_core.ids makes them, the
-- millisecond first, so inserts land at the right edge of the id index.
create function tickq.new_job_id() returns uuid
    language sql volatile parallel safe
    as $$
    select encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    placing substring(int8send(floor(extract(epoch from clock_timestamp())
                                                     * 1000)::bigint) from 3)
                    from 1 for 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;

-- One enqueue request, checked and written: the one body behind every enqueue of the SQL
-- surface, tickq.enqueue (a trigger, an RPC, another language) and tickq.enqueue_many (the
-- application login's only way to add jobs, the HTTP API's included). Not executable by the
-- application role: it takes the owner as an argument (p_owner; null for a trusted caller's
-- ownerless job), and only tickq.enqueue_many, which takes it from the session, may pass an
-- application user's.
--
-- p_job is one request as the HTTP API takes it: type, payload, queue, idempotency_key,
-- priority, max_attempts, delay or run_after, lease_seconds, backoff {base, factor, max,
-- jitter}, group, debounce {key, seconds[, max_seconds]} or throttle {key, seconds}; p_after
-- the jobs it waits for (resolved by the caller). Every value is checked against
-- tickq.enqueue_bounds() before anything is written; a refusal is SQLSTATE 22023
-- (invalid_parameter_value) with the field as the error's column name, a parent that cannot
-- be waited for TQ404 (its id as the detail). The time is the database's.
--
-- Returns the job's id, its status and the outcome: created, duplicate (an idempotency key's
-- live or succeeded holder, or a throttle's job), debounced (a debounce's job, which took the
-- payload). p_at numbers the request in its call, for the messages; p_names renames the
-- fields in the errors' column names (tickq.enqueue names its own parameters). With
-- p_defer, a plain request (no key, gate or parents) is checked but not written: its row
-- comes back as `deferred`, for the caller to insert with others in one statement (an
-- insert into the partitioned table costs about 0.1 ms to set up, several times a row's
-- own work).
create function tickq.enqueue_job(
    p_owner uuid,
    p_job jsonb,
    p_after uuid[] default '{}',
    p_at integer default null,
    p_names jsonb default '{}',
    p_defer boolean default false,
    out id uuid,
    out status text,
    out outcome text,
    out deferred tickq.jobs
) returns record
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
declare
    b           constant jsonb := tickq.enqueue_bounds();
    v_where     text := coalesce('job ' || p_at || ': ', '');
    v_field     text;
    v_value     jsonb;
    v_type      text;
    v_queue     text := 'default';
    v_payload   jsonb := '{}';
    v_key       text;
    v_priority  integer := 0;
    v_attempts  integer := 3;
    v_run       timestamptz;
    v_delay     double precision;
    v_lease     integer;
    v_base      double precision := 1;
    v_factor    double precision := 2;
    v_max       double precision := 300;
    v_jitter    double precision := 0;
    v_group     text;
    v_kind      text;
    v_gate      jsonb;
    v_gate_key  text;
    v_seconds   double precision;
    v_ceiling   double precision;
    v_gated     record;
    v_id        uuid := tickq.new_job_id();
    v_now       timestamptz := now();
    v_parents   record;
    v_pending   integer := 0;
begin
    if jsonb_typeof(p_job) is distinct from 'object' then
        raise exception 'tickq: %a job request must be a JSON object, got %', v_where,
            coalesce(jsonb_typeof(p_job), 'null')
            using errcode = 'invalid_parameter_value',
                  column = coalesce(p_names ->> ('job'), 'job');
    end if;
    -- Expressions rather than queries where they can be: a query per field would cost a bulk
    -- enqueue several times its inserts.
    if p_job - array['type', 'payload', 'queue', 'idempotency_key', 'priority', 'max_attempts',
                     'delay', 'run_after', 'lease_seconds', 'backoff', 'after', 'group',
                     'debounce', 'throttle'] <> '{}' then
        select string_agg(k, ', ' order by k) into v_field
        from jsonb_object_keys(p_job - array['type', 'payload', 'queue', 'idempotency_key',
                                              'priority', 'max_attempts', 'delay', 'run_after',
                                              'lease_seconds', 'backoff', 'after', 'group',
                                              'debounce', 'throttle']) k;
        raise exception 'tickq: %unknown fields: %', v_where, v_field
            using errcode = 'invalid_parameter_value',
                  column = split_part(v_field, ', ', 1);
    end if;
    -- Names: the type, the queue and the group.
    foreach v_field in array array['type', 'queue', 'group'] loop
        v_value := p_job -> v_field;
        continue when v_field <> 'type' and coalesce(jsonb_typeof(v_value), 'null') = 'null';
        if jsonb_typeof(v_value) is distinct from 'string'
           or char_length(v_value #>> '{}') not between 1 and (b ->> 'max_name')::integer
           or (v_value #>> '{}') collate "C" !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]*$' then
            raise exception 'tickq: % must be 1-% characters of letters, digits and _.:/- '
                            'starting with a letter or digit, got %', v_where || v_field,
                b ->> 'max_name', left(coalesce(v_value::text, 'nothing'), 60)
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> (v_field), v_field);
        end if;
    end loop;
    v_type := p_job ->> 'type';
    v_queue := coalesce(p_job ->> 'queue', v_queue);
    v_value := p_job -> 'payload';
    if v_value is not null and jsonb_typeof(v_value) <> 'null' then
        if jsonb_typeof(v_value) <> 'object' then
            raise exception 'tickq: %payload must be a JSON object, got %', v_where,
                jsonb_typeof(v_value)
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('payload'), 'payload');
        end if;
        v_payload := v_value;
    end if;
    if octet_length(v_payload::text) > (b ->> 'max_payload_bytes')::integer then
        raise exception 'tickq: %payload is % bytes, over the limit of %', v_where,
            octet_length(v_payload::text), b ->> 'max_payload_bytes'
            using errcode = 'invalid_parameter_value',
                  column = coalesce(p_names ->> ('payload'), 'payload');
    end if;
    if jsonb_path_exists(
           v_payload, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")') then
        raise exception 'tickq: %payload is nested too deeply (more than % arrays and objects)',
            v_where, b ->> 'max_json_depth'
            using errcode = 'invalid_parameter_value',
                  column = coalesce(p_names ->> ('payload'), 'payload');
    end if;
    v_value := p_job -> 'idempotency_key';
    if v_value is not null and jsonb_typeof(v_value) <> 'null' then
        if jsonb_typeof(v_value) <> 'string'
           or char_length(v_value #>> '{}') not between 1 and (b ->> 'max_key')::integer then
            raise exception 'tickq: %idempotency_key must be 1-% characters long', v_where,
                b ->> 'max_key'
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('idempotency_key'), 'idempotency_key');
        end if;
        v_key := v_value #>> '{}';
    end if;
    v_priority := coalesce(tickq.request_number(p_job, 'priority', -(b ->> 'max_priority')::float8,
                                                (b ->> 'max_priority')::float8, true, v_where),
                           v_priority);
    v_attempts := coalesce(tickq.request_number(p_job, 'max_attempts', 1,
                                                (b ->> 'max_attempts')::float8, true, v_where),
                           v_attempts);
    v_lease := tickq.request_number(p_job, 'lease_seconds', 1,
                                    (b ->> 'max_lease_seconds')::float8, true, v_where);
    v_delay := tickq.request_number(p_job, 'delay', 0, (b ->> 'max_delay_seconds')::float8,
                                    false, v_where);
    v_value := p_job -> 'run_after';
    if v_value is not null and jsonb_typeof(v_value) <> 'null' then
        if v_delay is not null then
            raise exception 'tickq: %give either run_after or delay, not both', v_where
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('run_after'), 'run_after');
        end if;
        if jsonb_typeof(v_value) <> 'string'
           or (v_value #>> '{}') !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+(Z|[+-][0-9:]+)$' then
            raise exception 'tickq: %run_after must be an ISO 8601 time with its offset, got %',
                v_where, left(v_value::text, 60)
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('run_after'), 'run_after');
        end if;
        v_run := (v_value #>> '{}')::timestamptz;
        if not tickq.readable_time(v_run)
           or v_run > v_now + (b ->> 'max_delay_seconds')::float8 * interval '1 second' then
            raise exception 'tickq: %run_after may be at most 366 days ahead, a finite time of '
                            'the years 1-9999, got %', v_where, v_value #>> '{}'
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('run_after'), 'run_after');
        end if;
    elsif v_delay is not null then
        v_run := v_now + v_delay * interval '1 second';
    end if;
    v_value := p_job -> 'backoff';
    if v_value is not null and jsonb_typeof(v_value) <> 'null' then
        if jsonb_typeof(v_value) <> 'object'
           or v_value - array['base', 'factor', 'max', 'jitter'] <> '{}' then
            raise exception 'tickq: %backoff must be an object of base, factor, max and jitter',
                v_where
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('backoff'), 'backoff');
        end if;
        v_base := coalesce(tickq.request_number(v_value, 'base', 0,
                                                (b ->> 'max_backoff_base')::float8, false,
                                                v_where || 'backoff.', 'backoff'), v_base);
        v_factor := coalesce(tickq.request_number(v_value, 'factor',
                                                  (b ->> 'min_backoff_factor')::float8,
                                                  (b ->> 'max_backoff_factor')::float8, false,
                                                  v_where || 'backoff.', 'backoff'), v_factor);
        v_max := coalesce(tickq.request_number(v_value, 'max', 0,
                                               (b ->> 'max_backoff_max')::float8, false,
                                               v_where || 'backoff.', 'backoff'), v_max);
        v_jitter := coalesce(tickq.request_number(v_value, 'jitter', 0, 1, false,
                                                  v_where || 'backoff.', 'backoff'), v_jitter);
        if v_base <= 0 or v_max < v_base then
            raise exception 'tickq: %backoff base must be above 0 and max at least base', v_where
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('backoff'), 'backoff');
        end if;
    end if;
    -- Debounce or throttle: one at most, never with a key, a debounce never with its own
    -- run time, neither after parents.
    for v_field in select k from unnest(array['debounce', 'throttle']) k loop
        v_value := p_job -> v_field;
        continue when v_value is null or jsonb_typeof(v_value) = 'null';
        if v_kind is not null then
            raise exception 'tickq: %give either debounce or throttle, not both', v_where
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('throttle'), 'throttle');
        end if;
        v_kind := v_field;
        v_gate := v_value;
    end loop;
    if v_kind is not null then
        if jsonb_typeof(v_gate) <> 'object'
           or not v_gate ?& array['key', 'seconds']
           or exists (select from jsonb_object_keys(v_gate) k
                      where k not in ('key', 'seconds', 'max_seconds')
                         or (k = 'max_seconds' and v_kind = 'throttle')) then
            raise exception 'tickq: % must be an object with key and seconds%',
                v_where || v_kind,
                case when v_kind = 'debounce' then ' (and max_seconds)' else '' end
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> (v_kind), v_kind);
        end if;
        if jsonb_typeof(v_gate -> 'key') <> 'string'
           or char_length(v_gate ->> 'key') not between 1 and (b ->> 'max_key')::integer then
            raise exception 'tickq: %.key must be 1-% characters long', v_where || v_kind,
                b ->> 'max_key'
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> (v_kind || '.key'), v_kind || '.key');
        end if;
        v_gate_key := v_gate ->> 'key';
        v_seconds := tickq.request_number(
            v_gate, 'seconds', 0, (b ->> 'max_delay_seconds')::float8, false,
            v_where || v_kind || '.',
            coalesce(p_names ->> (v_kind || '.seconds'), v_kind || '.seconds'));
        v_ceiling := tickq.request_number(
            v_gate, 'max_seconds', 0, (b ->> 'max_delay_seconds')::float8, false,
            v_where || v_kind || '.',
            coalesce(p_names ->> (v_kind || '.max_seconds'), v_kind || '.max_seconds'));
        if v_seconds <= 0 then
            raise exception 'tickq: %.seconds must be more than 0', v_where || v_kind
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> (v_kind || '.seconds'), v_kind || '.seconds');
        end if;
        if v_ceiling < v_seconds then
            raise exception 'tickq: %.max_seconds must be at least seconds (%), got %',
                v_where || v_kind, v_seconds, v_ceiling
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> (v_kind || '.max_seconds'),
                                        v_kind || '.max_seconds');
        end if;
        if v_key is not null then
            raise exception 'tickq: % cannot be combined with idempotency_key: each decides '
                            'which job requests land on', v_where || v_kind
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> (v_kind), v_kind);
        end if;
        if v_kind = 'debounce' and v_run is not null then
            raise exception 'tickq: %debounce cannot be combined with run_after or delay: the '
                            'debounce sets when its job runs', v_where
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('debounce'), 'debounce');
        end if;
        if cardinality(p_after) > 0 then
            raise exception 'tickq: % cannot be combined with after: a job that waits for '
                            'parents is its own job, never an earlier one of the key',
                v_where || v_kind
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> (v_kind), v_kind);
        end if;
    end if;
    if cardinality(p_after) > (b ->> 'max_parents')::integer then
        raise exception 'tickq: %after names more than % parents', v_where, b ->> 'max_parents'
            using errcode = 'invalid_parameter_value',
                  column = coalesce(p_names ->> ('after'), 'after');
    end if;
    -- The owner's share: its group is "<owner>/<group>" (default: the owner), a run time
    -- in the past is now. Without an owner, the group as given (default '') and the queue's
    -- depth checked here (an owner's insert is admitted by its trigger, jobs_app_admit).
    if p_owner is null then
        v_group := coalesce(p_job ->> 'group', '');
        for v_gated in select a.max_depth from tickq.queue_admit(array[v_queue], array[1]) a loop
            raise exception 'tickq: queue % is full', v_queue
                using errcode = 'TQ429', detail = v_queue, hint = v_gated.max_depth::text;
        end loop;
    else
        v_group := p_owner::text || coalesce('/' || (p_job ->> 'group'), '');
        if char_length(v_group) > (b ->> 'max_name')::integer then
            raise exception 'tickq: %group is % characters with its owner''s prefix, over the '
                            'limit of %', v_where, char_length(v_group), b ->> 'max_name'
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('group'), 'group');
        end if;
        if v_run < v_now then
            v_run := null;
        end if;
    end if;
    if v_kind is not null then
        select g.job_id, g.outcome, g.run_after into v_gated
        from tickq.job_gate(v_kind, v_gate_key, p_owner, v_seconds, v_ceiling, v_payload,
                            null, v_id) g;
        if v_gated.outcome <> 'created' then
            select v_gated.job_id, j.status, v_gated.outcome into id, status, outcome
            from tickq.jobs j where j.id = v_gated.job_id;
            return;
        end if;
        v_run := coalesce(v_gated.run_after, v_run);
    end if;
    -- The parents, locked in id order until this commits, so none finishes unseen: each is
    -- the owner's own (another owner's job is "not found"), neither dead nor cancelled.
    if cardinality(p_after) > 0 then
        select count(*) as found,
               count(*) filter (where j.status in ('dead', 'cancelled')) as failed,
               count(*) filter (where j.status <> 'succeeded') as unfinished,
               min(j.id::text) filter (where j.status in ('dead', 'cancelled')) as failed_id
        into v_parents
        from (select p.id, p.status from tickq.jobs p
              where p.id = any(p_after) and p.user_id is not distinct from p_owner
              order by p.id
              for no key update) j;
        if v_parents.found < cardinality(p_after) then
            select a into v_field from unnest(p_after) a
            where not exists (select from tickq.jobs p
                              where p.id = a and p.user_id is not distinct from p_owner)
            limit 1;
            raise exception 'tickq: %job % not found', v_where, v_field
                using errcode = 'TQ404',
                      column = coalesce(p_names ->> ('after'), 'after'), detail = v_field;
        end if;
        if v_parents.failed > 0 then
            raise exception 'tickq: %job % is %: a job after it could never run', v_where,
                v_parents.failed_id,
                (select p.status from tickq.jobs p where p.id = v_parents.failed_id::uuid)
                using errcode = 'TQ404',
                      column = coalesce(p_names ->> ('after'), 'after'),
                      detail = v_parents.failed_id;
        end if;
        v_pending := v_parents.unfinished;
    end if;
    if p_defer and v_key is null and v_kind is null and cardinality(p_after) = 0 then
        deferred.id := v_id;
        deferred.queue := v_queue;
        deferred.type := v_type;
        deferred.user_id := p_owner;
        deferred.payload := v_payload;
        deferred.max_attempts := v_attempts;
        deferred.priority := v_priority;
        deferred.run_after := coalesce(v_run, v_now);
        deferred.lease_seconds := v_lease;
        deferred.backoff_base := v_base;
        deferred.backoff_factor := v_factor;
        deferred.backoff_max := v_max;
        deferred.backoff_jitter := v_jitter;
        deferred.group_key := v_group;
        deferred.created_at := v_now;
        deferred.updated_at := v_now;
        id := v_id;
        status := 'queued';
        outcome := 'created';
        return;
    end if;
    -- A key's holder that commits between the key's insert and its lookup, or lets go of
    -- the key meanwhile, makes the enqueue go again, as the Python store does.
    for v_round in 1..10 loop
        if v_key is not null then
            insert into tickq.job_keys (idempotency_key, user_id, job_id)
            values (v_key, p_owner, v_id)
            on conflict do nothing;
            if not found then
                select j.id, j.status, 'duplicate' into id, status, outcome
                from tickq.job_keys k join tickq.jobs j on j.id = k.job_id
                where k.idempotency_key = v_key and k.user_id is not distinct from p_owner;
                if found then
                    return;
                end if;
                continue;
            end if;
        end if;
        insert into tickq.jobs as j (
            id, queue, type, user_id, payload, idempotency_key, max_attempts, priority,
            run_after, lease_seconds, backoff_base, backoff_factor, backoff_max,
            backoff_jitter, group_key, status, pending_parents, created_at, updated_at)
        values (v_id, v_queue, v_type, p_owner, v_payload, v_key, v_attempts, v_priority,
                coalesce(v_run, v_now), v_lease, v_base, v_factor, v_max,
                v_jitter, v_group, case when v_pending > 0 then 'waiting' else 'queued' end,
                v_pending, v_now, v_now)
        returning j.id, j.status, 'created' into id, status, outcome;
        if cardinality(p_after) > 0 then
            insert into tickq.job_dependencies (child_id, parent_id, user_id, counted)
            select v_id, p.id, p_owner, p.status <> 'succeeded'
            from tickq.jobs p
            where p.id = any(p_after);
            update tickq.jobs p set has_children = true
            where p.id = any(p_after) and not p.has_children;
        end if;
        return;
    end loop;
    raise exception 'tickq: enqueue of key % did not settle after 10 rounds of key conflicts',
        v_key
        using errcode = 'serialization_failure';
end $$;

-- Insert checked plain requests (tickq.enqueue_job with p_defer) in one statement: the
-- columns an enqueue sets; the rest take the table's defaults.
create function tickq.enqueue_rows(p_rows tickq.jobs[]) returns void
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    if cardinality(p_rows) > 0 then
        insert into tickq.jobs (
            id, queue, type, user_id, payload, max_attempts, priority, run_after,
            lease_seconds, backoff_base, backoff_factor, backoff_max, backoff_jitter,
            group_key, created_at, updated_at)
        select r.id, r.queue, r.type, r.user_id, r.payload, r.max_attempts, r.priority,
               r.run_after, r.lease_seconds, r.backoff_base, r.backoff_factor, r.backoff_max,
               r.backoff_jitter, r.group_key, r.created_at, r.updated_at
        from unnest(p_rows) r;
    end if;
end $$;

-- The application login's way to add jobs (the HTTP API's and EnqueueFunction's outside
-- callers' too): a JSON array of requests as the HTTP API takes them (tickq.enqueue_job says
-- which fields), each written for the transaction's user (tickq.current_user_id()) and on the
-- database's clock, never an owner, a time or an id the caller chose. A request's "after"
-- names job ids or the positions of earlier requests of the same call (the jobs those landed
-- on), so a whole graph goes in one call. All or nothing: the first bad request refuses the
-- call (SQLSTATE 22023 naming the field and the request, TQ404 for a parent, TQ429 for a full
-- queue) and nothing is written. Without a user, SQLSTATE 42501.
--
-- Returns one row per request, in order: its position, the job's id and status, and the
-- outcome (created, duplicate, debounced, throttled). field_names renames fields in the
-- errors' column names (tickq.enqueue names its own parameters).
create function tickq.enqueue_many(jobs jsonb, field_names jsonb default '{}')
    returns table (request integer, id uuid, status text, outcome text)
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_owner uuid := tickq.app_user('enqueue');
    v_max   integer := (tickq.enqueue_bounds() ->> 'max_batch')::integer;
    v_ids   uuid[] := '{}';
    v_job   jsonb;
    v_ref   jsonb;
    v_after uuid[];
    v_one   uuid;
    v_row   record;
    -- Plain requests, checked, waiting to go in together (tickq.enqueue_job's p_defer).
    v_rows  tickq.jobs[] := '{}';
begin
    if jsonb_typeof(enqueue_many.jobs) is distinct from 'array'
       or jsonb_array_length(enqueue_many.jobs) not between 1 and v_max then
        raise exception 'tickq: jobs must be a JSON array of 1-% requests', v_max
            using errcode = 'invalid_parameter_value', column = 'jobs';
    end if;
    request := 0;
    for v_job in select e from jsonb_array_elements(enqueue_many.jobs) e loop
        v_after := '{}';
        v_ref := case when jsonb_typeof(v_job) = 'object' then v_job -> 'after' end;
        if v_ref is not null and jsonb_typeof(v_ref) <> 'null' then
            if jsonb_typeof(v_ref) <> 'array' then
                raise exception 'tickq: job %: after must be a list of job ids', request
                    using errcode = 'invalid_parameter_value', column = 'after';
            end if;
            for v_ref in select e from jsonb_array_elements(v_ref) e loop
                if jsonb_typeof(v_ref) = 'number' and v_ref::numeric = trunc(v_ref::numeric)
                   and v_ref::numeric between 0 and request - 1 then
                    v_one := v_ids[v_ref::integer + 1];
                elsif jsonb_typeof(v_ref) = 'string'
                      and (v_ref #>> '{}') ~* '^[0-9a-f]{8}-?([0-9a-f]{4}-?){3}[0-9a-f]{12}$' then
                    v_one := (v_ref #>> '{}')::uuid;
                else
                    raise exception 'tickq: job %: after must name job ids or positions of '
                                    'earlier requests (0-%), got %', request, request - 1,
                        left(v_ref::text, 60)
                        using errcode = 'invalid_parameter_value', column = 'after';
                end if;
                if not v_one = any(v_after) then
                    v_after := v_after || v_one;
                end if;
            end loop;
        end if;
        if cardinality(v_after) > 0 then
            -- Its parents may be earlier requests: they go in first.
            perform tickq.enqueue_rows(v_rows);
            v_rows := '{}';
        end if;
        select e.id, e.status, e.outcome, e.deferred into v_row
        from tickq.enqueue_job(v_owner, v_job, v_after,
                               case when jsonb_array_length(enqueue_many.jobs) > 1
                                    then request end,
                               coalesce(enqueue_many.field_names, '{}'), true) e;
        if (v_row.deferred).id is not null then
            v_rows := v_rows || v_row.deferred;
        end if;
        v_ids := v_ids || v_row.id;
        id := v_row.id;
        status := v_row.status;
        outcome := v_row.outcome;
        return next;
        request := request + 1;
    end loop;
    perform tickq.enqueue_rows(v_rows);
end $$;

-- Cancel jobs not yet running at once (with their waiting descendants) and ask running ones
-- to stop at their next heartbeat: the one cancel of the store (a worker's, the CLI's) and of
-- tickq.cancel (an application user's, p_owner its user: only that owner's jobs). A saga not
-- running that owes undos (tickq.job_compensation_spare) compensates first: its
-- compensation recorded, runnable at once with attempts for its undos, its workflow children
-- cancelled now; its handler runs the undos, then it ends cancelled. It is returned as it is
-- (queued or retrying, not asked to stop), as is one compensating already, which is left to
-- finish. Returns the jobs it changed, as they are now.
create function tickq.jobs_cancel(p_ids uuid[], p_now timestamptz, p_owner uuid)
    returns setof tickq.jobs
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    return query
    with owed as materialized (
        -- Only a job that ran (claimed, or resumed) may have stored a step.
        select j.id,
               case when j.status in ('queued', 'retrying')
                         and (j.attempts > 0 or j.resumes is not null)
                    then tickq.job_compensation_spare(j.id) else 0 end as spare
        from tickq.jobs j
        where j.id = any(p_ids)
          and j.status in ('waiting', 'queued', 'retrying', 'running')
          and (p_owner is null or j.user_id = p_owner)
        -- Locked, so these columns are the row's latest: a job that suspended after this
        -- statement began is seen at rest, and compensates instead of ending without undos.
        for update of j
    ), cancelled as (
        update tickq.jobs j
        set status = case when j.status = 'running' or o.spare is distinct from 0
                          then j.status else 'cancelled' end,
            cancel_requested = (j.status = 'running'),
            run_after = case when j.status <> 'running' and o.spare > 0
                             then least(j.run_after, p_now) else j.run_after end,
            max_attempts = case when j.status <> 'running' and o.spare > 0
                                then greatest(j.max_attempts, j.attempts + o.spare)
                                else j.max_attempts end,
            finished_at = case when j.status = 'running' or o.spare is distinct from 0
                               then null else p_now end,
            updated_at = p_now
        from owed o
        where j.id = o.id
          and j.status in ('waiting', 'queued', 'retrying', 'running')
        returning j as job, j.id, j.status, j.has_children,
            j.status <> 'cancelled' and not j.cancel_requested and o.spare > 0 as begun
    ), begun as (
        insert into tickq.job_step_tries (job_id, kind, name, tries, error, at)
        select c.id, 'compensation', 'cancelled', 0, 'cancelled', p_now
        from cancelled c
        where c.begun
        on conflict (job_id, kind, name) do nothing
    ), settled as (
        select case when count(*) > 0
                    then tickq.jobs_settle(array_agg(c.id), array_agg(c.status), p_now)
               end as children
        from cancelled c
        where c.has_children and c.status = 'cancelled'
    ), compensating as (
        -- The workflow children of a parent that begins compensating are cancelled now.
        select case when count(*) > 0
                    then tickq.job_children_cancel(
                        array_agg(c.id), array_fill('cancelled'::text, array[count(*)::integer]),
                        p_now)
               end as children
        from cancelled c
        where c.has_children and c.begun
    )
    select (c.job).*
    from cancelled c cross join settled cross join compensating;
end $$;

-- An application user cancels one of its own jobs: one not yet running at once (with its
-- waiting descendants), a running one asked to stop (tickq.jobs_cancel says how, sagas
-- included). The owner is the transaction's user and the time the database's. Returns the
-- job as it is now. Refused, writing nothing: without a user (SQLSTATE 42501), a job that is
-- not this user's or does not exist (P0002), a job that has finished (TQ410).
create function tickq.cancel(job_id uuid) returns setof tickq.jobs
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_owner  uuid := tickq.app_user('cancel');
    v_status text;
begin
    return query select * from tickq.jobs_cancel(array[cancel.job_id], now(), v_owner);
    if found then
        return;
    end if;
    select j.status into v_status from tickq.jobs j
    where j.id = cancel.job_id and j.user_id = v_owner;
    if v_status is null then
        raise exception 'tickq: job % not found', cancel.job_id
            using errcode = 'no_data_found', column = 'job_id', detail = cancel.job_id::text;
    end if;
    raise exception 'tickq: cannot cancel job %: it is %', cancel.job_id, v_status
        using errcode = 'TQ410', column = 'job_id', detail = cancel.job_id::text,
              hint = v_status;
end $$;

-- Send dead (or, by id, cancelled) jobs back to the queue with fresh attempts: the one retry
-- of the store (a worker's, the CLI's, `retry_dead`) and of tickq.retry (an application
-- user's, p_owner its user: only that owner's jobs). A job whose idempotency key a live job
-- has taken meanwhile (tickq.job_keys) is skipped, and so is all but the newest of several
-- finished jobs sharing one key, since the key can be live only once (a job that takes the
-- key between this check and the update makes the statement fail in the jobs_key_take
-- trigger, changing nothing); and so is a job with a parent that has not succeeded
-- (dependencies), which must not run yet. Null filters match every job.
create function tickq.jobs_retry(
    p_statuses text[],
    p_ids uuid[],
    p_types text[],
    p_queues text[],
    p_limit integer,
    p_now timestamptz,
    p_owner uuid
) returns setof tickq.jobs
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    return query
    with candidates as (
        select j.id, j.idempotency_key, j.user_id, j.finished_at
        from tickq.jobs j
        where j.status = any(p_statuses)
          and (p_ids is null or j.id = any(p_ids))
          and (p_types is null or j.type = any(p_types))
          and (p_queues is null or j.queue = any(p_queues))
          and (p_owner is null or j.user_id = p_owner)
        order by j.finished_at
        limit p_limit
        for update skip locked
    ), chosen as (
        select c.id from candidates c
        where not exists (select from tickq.job_dependencies d
                          join tickq.jobs p on p.id = d.parent_id
                          where d.child_id = c.id and p.status <> 'succeeded')
          and (c.idempotency_key is null
           or (not exists (select from tickq.job_keys k
                           where k.idempotency_key = c.idempotency_key
                             and k.user_id is not distinct from c.user_id)
               and not exists (select from candidates n
                               where n.idempotency_key = c.idempotency_key
                                 and n.user_id is not distinct from c.user_id
                                 and (n.finished_at, n.id) > (c.finished_at, c.id))))
    ), retried as (
        update tickq.jobs j
        set status = 'queued',
            attempts = 0,
            run_after = p_now,
            cancel_requested = false,
            finished_at = null,
            updated_at = p_now
        from chosen
        where j.id = chosen.id
        returning j as job
    )
    select (r.job).* from retried r;
end $$;

-- An application user sends one of its own dead or cancelled jobs back to the queue with
-- fresh attempts (tickq.jobs_retry): keeping its completed steps (it resumes where it
-- failed, but for the steps its undos undid), or forgetting them all (fresh), or the step
-- from_step and every step stored after it. The owner is the transaction's user and the time
-- the database's. Returns the job as it is now. Refused, writing nothing: without a user
-- (SQLSTATE 42501), a job that is not this user's or does not exist (P0002), a job that is
-- not dead or cancelled, has a parent that has not succeeded or whose idempotency key a live
-- job holds (TQ410), fresh with from_step or an unknown step (22023).
create function tickq.retry(job_id uuid, fresh boolean default false,
                            from_step text default null)
    returns setof tickq.jobs
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_owner  uuid := tickq.app_user('retry');
    v_status text;
    v_parent record;
begin
    select j.status into v_status from tickq.jobs j
    where j.id = retry.job_id and j.user_id = v_owner
    for update;
    if v_status is null then
        raise exception 'tickq: job % not found', retry.job_id
            using errcode = 'no_data_found', column = 'job_id', detail = retry.job_id::text;
    end if;
    if v_status not in ('dead', 'cancelled') then
        raise exception 'tickq: cannot retry job %: it is %', retry.job_id, v_status
            using errcode = 'TQ410', column = 'job_id', detail = retry.job_id::text,
                  hint = v_status;
    end if;
    if coalesce(retry.fresh, false) and retry.from_step is not null then
        raise exception 'tickq: give either fresh or from_step, not both'
            using errcode = 'invalid_parameter_value', column = 'from_step';
    end if;
    if coalesce(retry.fresh, false) then
        perform tickq.job_durable_clear(retry.job_id);
    elsif retry.from_step is not null then
        if char_length(retry.from_step) not between 1 and 128 then
            raise exception 'tickq: from_step must be 1-128 characters long'
                using errcode = 'invalid_parameter_value', column = 'from_step';
        end if;
        if not exists (select from tickq.job_steps_forget_from(retry.job_id, retry.from_step))
        then
            raise exception 'tickq: job % has no step %', retry.job_id,
                quote_literal(retry.from_step)
                using errcode = 'invalid_parameter_value', column = 'from_step';
        end if;
    else
        perform tickq.job_compensation_clear(retry.job_id);
    end if;
    return query select * from tickq.jobs_retry(array['dead', 'cancelled'],
                                                array[retry.job_id], null, null, 1, now(),
                                                v_owner);
    if found then
        return;
    end if;
    select p.id, p.status into v_parent
    from tickq.job_dependencies d join tickq.jobs p on p.id = d.parent_id
    where d.child_id = retry.job_id and p.status <> 'succeeded'
    limit 1;
    if v_parent.id is not null then
        raise exception 'tickq: cannot retry (its parent % is %) job %: it is %',
            v_parent.id, v_parent.status, retry.job_id, v_status
            using errcode = 'TQ410', column = 'job_id', detail = retry.job_id::text,
                  hint = v_status;
    end if;
    raise exception 'tickq: cannot retry (its idempotency key is held by a live job) job %: '
                    'it is %', retry.job_id, v_status
        using errcode = 'TQ410', column = 'job_id', detail = retry.job_id::text,
              hint = v_status;
end $$;

-- Forget the steps, signals and wait of a finished (dead or cancelled) job, before a fresh
-- retry sends it back: the store's and tickq.retry's (with fresh). Returns the job's id; no
-- row: the job is not dead or cancelled.
create function tickq.job_durable_clear(p_id uuid) returns setof uuid
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    return query
    with target as materialized (
        select j.id from tickq.jobs j
        where j.id = p_id and j.status in ('dead', 'cancelled')
        for update
    ), steps as (
        delete from tickq.job_steps s using target where s.job_id = target.id
    ), signals as (
        delete from tickq.job_signals g using target where g.job_id = target.id
    ), tries as (
        delete from tickq.job_step_tries t using target where t.job_id = target.id
    ), children as (
        delete from tickq.job_children k using target where k.parent_id = target.id
    )
    update tickq.jobs j
    set resumes = null, wait_kind = null, wait_name = null, wait_until = null, signals = null
    from target
    where j.id = target.id
    returning j.id;
end $$;

-- Replay from a step: a dead or cancelled job forgets the step p_name and every step stored
-- after it (by finish time, then name, the order its views list them in), with their tries
-- and child links; its compensation and undo records go too, since it runs again. The
-- earlier steps stay, but for those its undos undid. The store's and tickq.retry's (with
-- from_step). Returns the names forgotten; no row: no such step, or the job is not dead or
-- cancelled.
create function tickq.job_steps_forget_from(p_id uuid, p_name text) returns setof text
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    return query
    with target as materialized (
        select j.id, s.finished_at, s.name
        from tickq.jobs j
        join tickq.job_steps s on s.job_id = j.id and s.name = p_name
        where j.id = p_id and j.status in ('dead', 'cancelled')
        for update of j
    ), later as materialized (
        -- And the earlier steps its undos undid: they are no longer in effect.
        select s.name
        from tickq.job_steps s, target
        where s.job_id = target.id
          and ((s.finished_at, s.name) >= (target.finished_at, target.name)
               or exists (select from tickq.job_step_tries t
                          where t.job_id = s.job_id and t.kind = 'undo' and t.name = s.name
                            and t.done_at is not null))
    ), steps as (
        delete from tickq.job_steps s using target
        where s.job_id = target.id and s.name in (select l.name from later l)
    ), tries as (
        delete from tickq.job_step_tries t using target
        where t.job_id = target.id
          and (t.kind = 'compensation' or t.kind = 'undo'
               or (t.kind = 'step' and t.name in (select l.name from later l)))
    ), links as (
        delete from tickq.job_children k using target
        where k.parent_id = target.id and k.step in (select l.name from later l)
    )
    select l.name from later l;
end $$;

-- A retry that keeps a compensated job's steps forgets those its undos undid, and the
-- compensation, so the job runs them again instead of compensating at once: the store's
-- and tickq.retry's (without fresh or from_step). Returns the names of the records it
-- forgot.
create function tickq.job_compensation_clear(p_id uuid) returns setof text
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    return query
    with target as materialized (
        select j.id from tickq.jobs j
        where j.id = p_id and j.status in ('dead', 'cancelled')
        for update
    ), undone as materialized (
        select t.name from tickq.job_step_tries t, target
        where t.job_id = target.id and t.kind = 'undo' and t.done_at is not null
    ), steps as (
        delete from tickq.job_steps s using target
        where s.job_id = target.id and s.name in (select u.name from undone u)
    )
    delete from tickq.job_step_tries t using target
    where t.job_id = target.id and t.kind in ('compensation', 'undo')
    returning t.name;
end $$;

-- Keep a signal for a live job and wake it when it waits for that name: the store's and
-- tickq.signal's. The job row is locked first and written (its `signals`), so a suspension
-- racing this signal either commits first and is woken here, or waits for this commit and
-- sees the name. Returns the status of the job, whether the name was taken, the signal
-- bytes and count it holds, whether this signal was kept and whether it woke the job; no
-- row: no such job.
create function tickq.job_signals_send(
    p_id uuid,
    p_name text,
    p_payload jsonb,
    p_size integer,
    p_max_bytes integer,
    p_max_signals integer,
    p_now timestamptz
) returns table (status text, taken boolean, bytes bigint, held bigint, kept boolean,
                 woke boolean)
    language plpgsql volatile
    set search_path = pg_catalog, pg_temp
    as $$
begin
    return query
    with job as materialized (
        select j.id, j.status from tickq.jobs j where j.id = p_id for update
    ), counted as materialized (
        select coalesce(sum(s.size), 0)::bigint as bytes,
               coalesce(bool_or(s.name = p_name), false) as taken,
               count(*) as held
        from tickq.job_signals s where s.job_id = p_id
    ), sent as (
        insert into tickq.job_signals (job_id, name, payload, size, sent_at)
        select job.id, p_name, p_payload, p_size, p_now
        from job, counted
        where job.status not in ('succeeded', 'dead', 'cancelled')
          and not counted.taken and counted.bytes + p_size <= p_max_bytes
          and counted.held < p_max_signals
        -- The same name sent concurrently: the later one finds the key taken and keeps none.
        on conflict (job_id, name) do nothing
        returning job_id
    ), woken as (
        update tickq.jobs j
        set signals = array_append(coalesce(j.signals, '{}'::text[]), p_name),
            run_after = case when j.status in ('queued', 'retrying') and j.wait_kind = 'signal'
                                  and j.wait_name = p_name
                             then least(j.run_after, p_now) else j.run_after end,
            updated_at = p_now
        from sent
        where j.id = sent.job_id
        returning j.status in ('queued', 'retrying') and j.wait_kind = 'signal'
                  and j.wait_name = p_name as woke
    )
    select job.status, counted.taken, counted.bytes, counted.held, exists (select from sent),
           coalesce((select w.woke from woken w), false)
    from job, counted;
end $$;

-- An application user sends the signal `name` to one of its own live jobs: kept for it, and
-- waking it when it waits for that name (tickq.job_signals_send). The owner is the
-- transaction's user and the time the database's. Returns whether it woke the job. Refused,
-- writing nothing: without a user (SQLSTATE 42501), a job that is not this user's or does not
-- exist (P0002), a finished job (TQ410), a bad name or payload, a name already sent, more
-- signals or signal bytes than a job holds (22023, the column naming the field).
create function tickq.signal(job_id uuid, name text, payload jsonb default null)
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

-- Put an event into the outbox, in the caller's transaction: published once it commits. The
-- transaction's user owns it (tickq.current_user_id()); without one, only a trusted login (a
-- worker, tickq_worker, or the tables' owner) may publish, an ownerless event. Never a job's
-- event, never already published. The source is a plain ASCII name, and no source but the
-- default 'tickq.app' may begin with "tickq" in any case: consumers trust tickq's own
-- lifecycle events by their source. Returns the event's row id and its event_id (in its
-- detail as sent). Refused, writing nothing: SQLSTATE 22023 naming the field, 42501 without
-- a user on an untrusted login.
create function tickq.publish(detail_type text, detail jsonb,
                              source text default 'tickq.app',
                              out id bigint, out event_id uuid)
    returns record
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    b       constant jsonb := tickq.enqueue_bounds();
    v_owner uuid := tickq.current_user_id();
begin
    if v_owner is null
       and not pg_has_role(session_user, 'tickq_worker', 'USAGE')
       and not pg_has_role(session_user, (select c.relowner from pg_class c
                                          where c.oid = 'tickq.outbox'::regclass), 'USAGE')
    then
        raise exception 'tickq: an application''s event needs the transaction''s user'
            using errcode = 'insufficient_privilege',
                  hint = 'select set_config(''tickq.user_id'', <user uuid>, true) first';
    end if;
    if char_length(publish.detail_type) is null
       or char_length(publish.detail_type) not between 1 and (b ->> 'max_detail_type')::integer
    then
        raise exception 'tickq: detail_type must be 1-% characters long', b ->> 'max_detail_type'
            using errcode = 'invalid_parameter_value', column = 'detail_type';
    end if;
    if coalesce(publish.source, '') collate "C" !~ '^[A-Za-z0-9][A-Za-z0-9._/-]*$'
       or char_length(publish.source) > (b ->> 'max_source')::integer then
        raise exception 'tickq: source must be 1-% characters of ASCII letters, digits and '
                        '._/- starting with a letter or digit, got %', b ->> 'max_source',
            coalesce(quote_literal(left(publish.source, 60)), 'null')
            using errcode = 'invalid_parameter_value', column = 'source';
    end if;
    if lower(publish.source) like 'tickq%' and publish.source <> 'tickq.app' then
        raise exception 'tickq: source % is reserved: sources beginning with tickq are tickq''s',
            quote_literal(publish.source)
            using errcode = 'invalid_parameter_value', column = 'source';
    end if;
    if jsonb_typeof(publish.detail) is distinct from 'object' then
        raise exception 'tickq: detail must be a JSON object, got %',
            coalesce(jsonb_typeof(publish.detail), 'null')
            using errcode = 'invalid_parameter_value', column = 'detail';
    end if;
    if octet_length(publish.detail::text) > (b ->> 'max_detail_bytes')::integer then
        raise exception 'tickq: detail is % bytes, over the limit of %',
            octet_length(publish.detail::text), b ->> 'max_detail_bytes'
            using errcode = 'invalid_parameter_value', column = 'detail';
    end if;
    insert into tickq.outbox as o (user_id, source, detail_type, detail)
    values (v_owner, publish.source, publish.detail_type, publish.detail)
    returning o.id, o.event_id into id, event_id;
end $$;

-- Take the ids of the jobs a statement inserted in tickq.job_ids, whose key refuses an id
-- any job holds (the jobs_ids_take trigger, once per insert statement). Security definer:
-- no role but the owner writes the table.
create function tickq.job_ids_take() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    insert into tickq.job_ids (id) select a.id from arrived a;
    return null;
end $$;

-- A job's id never changes: the side tables and tickq.job_ids name it (the jobs_id_fixed
-- trigger, on an update that sets the id).
create function tickq.jobs_id_fixed() returns trigger
    language plpgsql
    as $$
begin
    if new.id is distinct from old.id then
        raise exception 'tickq: a job''s id never changes (% -> %)', old.id, new.id
            using errcode = 'TQ422', detail = 'id';
    end if;
    return new;
end $$;

-- Enqueue one job from SQL: from a trigger in the caller's transaction, a PostgREST or
-- Supabase RPC, or any language with a PostgreSQL driver. Returns the job's id; with an
-- idempotency key a live or succeeded job of the same owner holds, the holder's id; with a
-- debounce or throttle (debounce_key, debounce_seconds[, debounce_max_seconds];
-- throttle_key, throttle_seconds) whose key's job took the enqueue, that job's id
-- (tickq.job_gate says which; neither goes with an idempotency key or the other, nor a
-- debounce with run_after).
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
-- Security invoker: a caller without a user enqueues with its own rights.
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
            'key', enqueue.throttle_key, 'seconds', enqueue.throttle_seconds) end);
    if v_owner is not null then
        select e.id into v_id from tickq.enqueue_many(jsonb_build_array(v_job), v_names) e;
    else
        select e.id into v_id from tickq.enqueue_job(null, v_job, '{}', null, v_names) e;
    end if;
    return v_id;
end $$;

-- Debounce and throttle (queue_core/gates.py): which job an enqueue of a gate's key lands
-- on, called by every gated enqueue (the Python store's and tickq.enqueue) before it
-- inserts anything. Returns the job: outcome 'created' when the caller is to insert it (id
-- p_new_id, run_after as returned; null: the caller's own), 'debounced' or 'throttled' when
-- an earlier job of the key took the enqueue (written here: nothing is left to insert).
--
-- * debounce: the key's latest job, while it is queued and has not started, takes the new
--   payload (the latest wins) and runs at now + seconds, never later than its first enqueue
--   + max_seconds (null: no bound).
-- * throttle: the key's latest job, while now is inside its window (its creation + seconds),
--   takes the enqueue unchanged.
-- Otherwise a new job of the key starts a new burst or window.
--
-- Keys are per owner: the transaction's user (an application may gate only its own jobs),
-- else p_owner (a worker naming the job's owner), else no owner, as idempotency keys. The
-- checks refuse with SQLSTATE 22023 and the parameter as the column, before any write.
-- Workers only: an application's gated enqueue is tickq.enqueue_many's, which names
-- neither the owner nor the clock.
--
-- Concurrent enqueues of one key take turns on a row of tickq.job_gate_turns: each inserts
-- the key's row and deletes it at once, in its transaction. A second enqueue's insert of
-- the key meets the first's row, which stays in its way until the first transaction ends
-- (a unique index waits for the inserting transaction, whatever it did with the row since),
-- then goes on and sees the first's job, so no update is lost and no second job is made. A
-- row rather than an advisory lock, which any login may take (and pg_locks shows): no role
-- but the owner may touch this table, so no other login can hold a key's turn. The table is
-- empty whenever no gated enqueue is under way.
-- Security definer, so nobody needs a write grant on the gates; only the caller's own key
-- (per owner, above) and jobs of that owner are touched, whatever id a direct caller
-- passes.
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
    insert into tickq.job_gate_turns (kind, gate_key, owner)
    values (p_kind, p_key, coalesce(v_owner, '00000000-0000-0000-0000-000000000000'::uuid))
    on conflict do nothing;
    delete from tickq.job_gate_turns t
    where t.kind = p_kind and t.gate_key = p_key
      and t.owner = coalesce(v_owner, '00000000-0000-0000-0000-000000000000'::uuid);
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

-- A deleted job takes its key, steps, step tries, signals, dependency edges, gate and
-- workflow children with it, as foreign keys' cascades would (a partitioned tickq.jobs
-- cannot be referenced by id alone). A statement trigger with the deleted rows
-- (jobs_forget, triggers.sql): one set-based delete per table and statement, and nothing at all for statements that delete no job. Security definer,
-- as a cascade: the rows go whoever deleted the job. Key rows are found by key (keyless
-- deleted jobs match none).
create or replace function tickq.jobs_forget() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_keys k using gone g
    where k.idempotency_key = g.idempotency_key
      and k.user_id is not distinct from g.user_id
      and k.job_id = g.id;
    delete from tickq.job_steps s using gone g where s.job_id = g.id;
    delete from tickq.job_signals s using gone g where s.job_id = g.id;
    delete from tickq.job_dependencies d using gone g where d.child_id = g.id;
    delete from tickq.job_dependencies d using gone g where d.parent_id = g.id;
    delete from tickq.job_gates x using gone g where x.job_id = g.id;
    delete from tickq.job_step_tries t using gone g where t.job_id = g.id;
    delete from tickq.job_ids i using gone g where i.id = g.id;
    -- A workflow's children go with their parent (this trigger fires again for them; a
    -- statement trigger fires even when it deletes nothing, hence the test first).
    if exists (select from tickq.job_children k join gone g on g.id = k.parent_id) then
        delete from tickq.jobs c
        where c.id in (select k.child_id from tickq.job_children k join gone g
                       on g.id = k.parent_id);
    end if;
    delete from tickq.job_children k using gone g
    where k.parent_id = g.id or k.child_id = g.id;
    return null;
end $$;

-- Emptying the jobs (tests, benchmarks, a reset) empties what hung on them, as TRUNCATE ...
-- CASCADE would through foreign keys. A delete, not a truncate: a TRUNCATE that names
-- these tables too is still using them here.
create or replace function tickq.jobs_forget_all() returns trigger
    language plpgsql security definer
    set search_path = pg_catalog, pg_temp
    as $$
begin
    delete from tickq.job_steps;
    delete from tickq.job_signals;
    delete from tickq.job_dependencies;
    delete from tickq.job_settlements;
    delete from tickq.job_gates;
    delete from tickq.job_step_tries;
    delete from tickq.job_children;
    delete from tickq.job_ids;
    return null;
end $$;

-- Drop one day partition whose every job retention lets go (queue_core/retention.py decides
-- which), with the idempotency keys, steps, signals, dependency edges and gates of its jobs,
-- in one transaction. Returns what went, by queue, type and status, for the pruning report (a row
-- of nulls when it was empty); nothing, and the partition stays, when one of its jobs is a
-- parent that an unfinished child still needs (the child reads its result when it runs).
create or replace function tickq.jobs_partition_drop(p_name text)
    returns table (queue text, type text, status text, n bigint)
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    set lock_timeout = '200ms'
    as $$
declare
    v_try    integer := 0;
    v_needed boolean;
begin
    if p_name !~ '^jobs_done_[0-9]{8}$' or to_regclass('tickq.' || p_name) is null then
        raise exception 'tickq: no day partition named %', p_name
            using errcode = 'invalid_parameter_value';
    end if;
    loop
        begin
            -- Nothing reads or writes the partition from here on: a child enqueued after a
            -- parent in it was checked would otherwise lose the parent's result.
            execute format('lock table tickq.%I in access exclusive mode', p_name);
            execute format(
                'select exists (select from tickq.%I j join tickq.job_dependencies d'
                ' on d.parent_id = j.id join tickq.jobs_live c on c.id = d.child_id'
                ' where j.has_children)', p_name) into strict v_needed;
            if v_needed then
                return;
            end if;
            -- One row per queue, type and status; one row of nulls for an empty partition.
            return query execute format(
                'select j.queue, j.type, j.status, count(*) from tickq.%I j'
                ' group by j.queue, j.type, j.status'
                ' union all select null, null, null, 0'
                ' where not exists (select from tickq.%I)', p_name, p_name);
            execute format('delete from tickq.job_keys k using tickq.%I j'
                           ' where k.idempotency_key = j.idempotency_key'
                           ' and k.user_id is not distinct from j.user_id'
                           ' and k.job_id = j.id', p_name);
            execute format('delete from tickq.job_steps s using tickq.%I j'
                           ' where s.job_id = j.id', p_name);
            execute format('delete from tickq.job_signals s using tickq.%I j'
                           ' where s.job_id = j.id', p_name);
            execute format('delete from tickq.job_dependencies d using tickq.%I j'
                           ' where d.child_id = j.id or d.parent_id = j.id', p_name);
            execute format('delete from tickq.job_gates x using tickq.%I j'
                           ' where x.job_id = j.id', p_name);
            execute format('delete from tickq.job_step_tries t using tickq.%I j'
                           ' where t.job_id = j.id', p_name);
            execute format('delete from tickq.job_children k using tickq.%I j'
                           ' where k.child_id = j.id or k.parent_id = j.id', p_name);
            execute format('delete from tickq.job_ids i using tickq.%I j'
                           ' where i.id = j.id', p_name);
            execute format('drop table tickq.%I', p_name);
            return;
        exception when lock_not_available or deadlock_detected then
            v_try := v_try + 1;
            if v_try >= 20 then
                raise;
            end if;
            perform pg_sleep(0.05 * v_try);
        end;
    end loop;
end $$;

-- Work off settlements left by the statements that finished their parents
-- (tickq.jobs_settle): at most p_budget children, in one short transaction, from the
-- settlements no other worker holds (SKIP LOCKED), oldest first, so no settlement waits
-- behind later ones however many there are; of one age, successes first, then by root, as
-- tickq.jobs_settle_run takes them. Returns the children settled; 0 when none is left.
create or replace function tickq.jobs_settle_pending(p_budget integer, p_at timestamptz)
    returns integer
    language plpgsql volatile
    as $$
begin
    return tickq.jobs_settle_run(
        array(select s from tickq.job_settlements s
              order by s.created_at, s.status <> 'succeeded', s.root_id, s.parent_id
              limit 100
              for update skip locked),
        p_budget, coalesce(p_at, now()));
end $$;

drop function tickq.job_gate_app(text, text, double precision, double precision, jsonb, uuid);

create trigger jobs_ids_take after insert on tickq.jobs
    referencing new table as arrived
    for each statement execute function tickq.job_ids_take();
create trigger jobs_id_fixed before update of id on tickq.jobs
    for each row execute function tickq.jobs_id_fixed();

-- The application role's writes, all of them.
revoke insert, update, delete on tickq.jobs, tickq.job_keys, tickq.job_steps,
    tickq.job_signals, tickq.job_dependencies, tickq.job_settlements, tickq.outbox,
    tickq.job_step_tries, tickq.job_children, tickq.job_gates from tickq_app;
drop policy jobs_app_insert_status on tickq.jobs;
drop policy job_steps_owner_clear on tickq.job_steps;
drop policy job_signals_owner_send on tickq.job_signals;
drop policy job_signals_owner_clear on tickq.job_signals;
drop policy outbox_owner_publish on tickq.outbox;
drop policy job_step_tries_owner_clear on tickq.job_step_tries;
drop policy job_step_tries_owner_compensation on tickq.job_step_tries;
drop policy job_children_owner_clear on tickq.job_children;

revoke all on function tickq.job_ids_take(), tickq.jobs_id_fixed() from public;
revoke all on function tickq.enqueue_rows(tickq.jobs[]) from public;
grant execute on function tickq.enqueue_rows(tickq.jobs[]) to tickq_worker;
revoke all on function tickq.enqueue_many(jsonb, jsonb), tickq.cancel(uuid),
    tickq.retry(uuid, boolean, text), tickq.signal(uuid, text, jsonb),
    tickq.publish(text, jsonb, text) from public;
grant execute on function tickq.enqueue_many(jsonb, jsonb), tickq.cancel(uuid),
    tickq.retry(uuid, boolean, text), tickq.signal(uuid, text, jsonb),
    tickq.publish(text, jsonb, text) to tickq_app, tickq_worker;
revoke all on function tickq.enqueue_job(uuid, jsonb, uuid[], integer, jsonb, boolean),
    tickq.jobs_cancel(uuid[], timestamptz, uuid),
    tickq.jobs_retry(text[], uuid[], text[], text[], integer, timestamptz, uuid),
    tickq.job_signals_send(uuid, text, jsonb, integer, integer, integer, timestamptz),
    tickq.job_durable_clear(uuid), tickq.job_steps_forget_from(uuid, text),
    tickq.job_compensation_clear(uuid) from public;
grant execute on function tickq.enqueue_job(uuid, jsonb, uuid[], integer, jsonb, boolean),
    tickq.jobs_cancel(uuid[], timestamptz, uuid),
    tickq.jobs_retry(text[], uuid[], text[], text[], integer, timestamptz, uuid),
    tickq.job_signals_send(uuid, text, jsonb, integer, integer, integer, timestamptz),
    tickq.job_durable_clear(uuid), tickq.job_steps_forget_from(uuid, text),
    tickq.job_compensation_clear(uuid) to tickq_worker;
