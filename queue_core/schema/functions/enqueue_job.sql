-- One enqueue request, checked and written: the one body behind every enqueue of the SQL
-- surface, tickq.enqueue (a trigger, an RPC, another language) and tickq.enqueue_many (the
-- application login's only way to add jobs, the HTTP API's included). Not executable by the
-- application role: it takes the owner as an argument (p_owner; null for a trusted caller's
-- ownerless job), and only tickq.enqueue_many, which takes it from the session, may pass an
-- application user's.
--
-- p_job is one request as the HTTP API takes it: type, payload, queue, idempotency_key,
-- priority, max_attempts, delay or run_after, lease_seconds, timeout, backoff {base, factor,
-- max, jitter}, group, debounce {key, seconds[, max_seconds]} or throttle {key, seconds},
-- flow_keys [...]; p_after the jobs it waits for (resolved by the caller). Every value is checked against
-- tickq.enqueue_bounds() before anything is written; a refusal is SQLSTATE 22023
-- (invalid_parameter_value) with the field as the error's column name, a parent that cannot
-- be waited for TQ404 (its id as the detail). The time is the database's. A timeout raises
-- the lease to at least the timeout plus timeout_lease_margin, as the Python enqueue does.
-- The job's flow keys are its task's templates (the catalogue's flow_key_templates, not a
-- request field) filled from the payload's top-level fields, then the request's own, an
-- owner's stored as '<owner>/key' (queue_core/model/flow.py says the same in Python).
--
-- Returns the job's id, its status and the outcome: created, duplicate (an idempotency key's
-- live or succeeded holder, or a throttle's job), debounced (a debounce's job, which took the
-- payload). p_at numbers the request in its call, for the messages; p_names renames the
-- fields in the errors' column names (tickq.enqueue names its own parameters). With
-- p_defer, a plain request (no key, gate or parents) is checked but not written: its row
-- comes back as `deferred`, for the caller to insert with others in one statement (an
-- insert into the partitioned table costs about 0.1 ms to set up, several times a row's
-- own work).
create or replace function tickq.enqueue_job(
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
    v_timeout   integer;
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
    v_defaults  jsonb;
    v_flow      text[] := '{}';
    v_text      text;
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
                     'delay', 'run_after', 'lease_seconds', 'timeout', 'backoff', 'after',
                     'group', 'debounce', 'throttle', 'flow_keys'] <> '{}' then
        select string_agg(k, ', ' order by k) into v_field
        from jsonb_object_keys(p_job - array['type', 'payload', 'queue', 'idempotency_key',
                                              'priority', 'max_attempts', 'delay', 'run_after',
                                              'lease_seconds', 'timeout', 'backoff', 'after',
                                              'group', 'debounce', 'throttle', 'flow_keys']) k;
        raise exception 'tickq: %unknown fields: %', v_where, v_field
            using errcode = 'invalid_parameter_value',
                  column = split_part(v_field, ', ', 1);
    end if;
    -- The task's settings (tickq.task_catalog) for what the request leaves out, checked
    -- below as the request's own. Once the catalogue knows any type, a type it does not
    -- know is refused (after the names), unless the setting tickq.accept_unknown_types is
    -- on: a deployment that enqueues types no worker publishes.
    select c.defaults into v_defaults from tickq.task_catalog c where c.type = p_job ->> 'type';
    if v_defaults is not null then
        p_job := v_defaults || (select coalesce(jsonb_object_agg(e.key, e.value), '{}')
                                from jsonb_each(p_job) e where jsonb_typeof(e.value) <> 'null');
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
    if v_defaults is null and exists (select from tickq.task_catalog)
       and coalesce(current_setting('tickq.accept_unknown_types', true), '') <> 'on' then
        raise exception 'tickq: %type % is not in the task catalogue (known: %)', v_where,
            quote_literal(p_job ->> 'type'),
            (select string_agg(k.type, ', ' order by k.type)
             from (select c.type from tickq.task_catalog c order by c.type limit 30) k)
            using errcode = 'invalid_parameter_value',
                  column = coalesce(p_names ->> ('type'), 'type');
    end if;
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
    -- Flow keys: the task's templates filled from the payload, then the request's own.
    for v_field in select t from jsonb_array_elements_text(
                                 coalesce(v_defaults -> 'flow_key_templates', '[]')) t loop
        v_text := v_field;
        for v_value in select to_jsonb(m[1])
                       from regexp_matches(v_field, '\{([A-Za-z_][A-Za-z0-9_]*)\}', 'g') m loop
            if jsonb_typeof(v_payload -> (v_value #>> '{}')) is distinct from 'string'
               and coalesce((v_payload -> (v_value #>> '{}')) #>> '{}', '') !~ '^-?[0-9]+$' then
                raise exception 'tickq: %template % needs the payload''s top-level field % as a '
                                'string or an integer', v_where, quote_literal(v_field),
                    quote_literal(v_value #>> '{}')
                    using errcode = 'invalid_parameter_value',
                          column = coalesce(p_names ->> ('flow_keys'), 'flow_keys');
            end if;
            v_text := replace(v_text, '{' || (v_value #>> '{}') || '}',
                              (v_payload -> (v_value #>> '{}')) #>> '{}');
        end loop;
        if char_length(v_text) > (b ->> 'max_flow_key')::integer
           or v_text collate "C" !~ '^[A-Za-z0-9_.:/@=+-]+$' then
            raise exception 'tickq: %template % gives the flow key %, not 1-% characters of '
                            'letters, digits and _.:/@=+-', v_where, quote_literal(v_field),
                quote_literal(left(v_text, 60)), b ->> 'max_flow_key'
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('flow_keys'), 'flow_keys');
        end if;
        v_flow := array_append(v_flow, v_text);
    end loop;
    v_value := p_job -> 'flow_keys';
    if v_value is not null and jsonb_typeof(v_value) <> 'null' then
        if jsonb_typeof(v_value) <> 'array'
           or jsonb_array_length(v_value) > (b ->> 'max_flow_keys')::integer
           or exists (select from jsonb_array_elements(v_value) e
                      where jsonb_typeof(e) <> 'string'
                         or char_length(e #>> '{}') > (b ->> 'max_flow_key')::integer
                         or (e #>> '{}') collate "C" !~ '^[A-Za-z0-9_.:/@=+-]+$') then
            raise exception 'tickq: %flow_keys must be a list of at most % keys of 1-% '
                            'characters of letters, digits and _.:/@=+-, got %', v_where,
                b ->> 'max_flow_keys', b ->> 'max_flow_key', left(v_value::text, 60)
                using errcode = 'invalid_parameter_value',
                      column = coalesce(p_names ->> ('flow_keys'), 'flow_keys');
        end if;
        -- An owner's keys are its own: no tenant can hold back another's by naming its key.
        v_flow := v_flow || array(
            select case when p_owner is null then e else p_owner::text || '/' || e end
            from jsonb_array_elements_text(v_value) e);
    end if;
    v_flow := array(select k from unnest(v_flow) with ordinality f (k, n)
                    group by k order by min(n));
    if cardinality(v_flow) > (b ->> 'max_flow_keys')::integer then
        raise exception 'tickq: %at most % flow keys per job, its task''s included, got %',
            v_where, b ->> 'max_flow_keys', cardinality(v_flow)
            using errcode = 'invalid_parameter_value',
                  column = coalesce(p_names ->> ('flow_keys'), 'flow_keys');
    end if;
    v_priority := coalesce(tickq.request_number(p_job, 'priority', -(b ->> 'max_priority')::float8,
                                                (b ->> 'max_priority')::float8, true, v_where),
                           v_priority);
    v_attempts := coalesce(tickq.request_number(p_job, 'max_attempts', 1,
                                                (b ->> 'max_attempts')::float8, true, v_where),
                           v_attempts);
    v_lease := tickq.request_number(p_job, 'lease_seconds', 1,
                                    (b ->> 'max_lease_seconds')::float8, true, v_where);
    v_timeout := tickq.request_number(p_job, 'timeout', 1,
                                      (b ->> 'max_timeout_seconds')::float8, true, v_where);
    if v_timeout is not null then
        v_lease := least((b ->> 'max_lease_seconds')::integer,
                         greatest(coalesce(v_lease, 0),
                                  v_timeout + (b ->> 'timeout_lease_margin')::integer));
    end if;
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
        deferred.timeout_seconds := v_timeout;
        deferred.backoff_base := v_base;
        deferred.backoff_factor := v_factor;
        deferred.backoff_max := v_max;
        deferred.backoff_jitter := v_jitter;
        deferred.group_key := v_group;
        deferred.flow_keys := v_flow;
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
            run_after, lease_seconds, timeout_seconds, backoff_base, backoff_factor,
            backoff_max, backoff_jitter, group_key, status, pending_parents, flow_keys,
            created_at, updated_at)
        values (v_id, v_queue, v_type, p_owner, v_payload, v_key, v_attempts, v_priority,
                coalesce(v_run, v_now), v_lease, v_timeout, v_base, v_factor, v_max,
                v_jitter, v_group, case when v_pending > 0 then 'waiting' else 'queued' end,
                v_pending, v_flow, v_now, v_now)
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

-- What those functions run, which take an owner or a clock as arguments: the workers'
-- alone (tickq.enqueue's trusted path, the store's statements).
revoke all on function tickq.enqueue_job(uuid, jsonb, uuid[], integer, jsonb, boolean) from public;
grant execute on function tickq.enqueue_job(uuid, jsonb, uuid[], integer, jsonb, boolean) to tickq_worker;
