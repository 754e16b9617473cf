-- Debounce and throttle: enqueues of one key (per owner) that land on one job.
--
-- A table of the jobs gates made (tickq.job_gates), the function every gated enqueue asks
-- which job it lands on (tickq.job_gate) and the operator's look at a job's gate
-- (tickq.operator_job_gate); tickq.enqueue with the gate's parameters (a new signature:
-- the old one is dropped, its grants with it); the application guard letting a debounce
-- move an application's own job (tickq.jobs_app_guard); and a deleted job taking its gate
-- row with it (tickq.jobs_forget, jobs_forget_all, jobs_partition_drop).

-- Debounce and throttle (queue_core/gates.py, tickq.job_gate): one row per job a gate
-- created, the key's latest job being the one an enqueue of the key may land on. A deleted
-- job takes its row with it (tickq.jobs_forget, jobs_forget_all, jobs_partition_drop): no
-- foreign key, as for tickq.job_keys.
create table tickq.job_gates (
    job_id     uuid primary key,  -- the job's gate, for its views (debounced N times)
    kind       text not null,
    gate_key   text not null,
    user_id    uuid,              -- keys are per owner, as idempotency keys
    first_at   timestamptz not null,  -- its first enqueue: debounce's bound, throttle's window
    enqueues   integer not null default 1,  -- the enqueues that landed on the job
    constraint job_gates_kind_check check (kind in ('debounce', 'throttle'))
);
-- The key's latest job, per owner (a null owner, a worker's enqueue, as one owner: the nil
-- uuid, which no user holds), read by every gated enqueue.
create index job_gates_key_idx on tickq.job_gates (
    kind, gate_key, coalesce(user_id, '00000000-0000-0000-0000-000000000000'::uuid),
    first_at desc);

-- Gates: tickq.job_gate (security definer, run as the owner) writes them; an application
-- user reads its own jobs' gates (their views), a worker everything.
grant select on tickq.job_gates to tickq_app, tickq_worker;

alter table tickq.job_gates enable row level security;
alter table tickq.job_gates force row level security;

create policy job_gates_owner on tickq.job_gates for select to tickq_app
    using (user_id = tickq.current_user_id());
create policy job_gates_worker on tickq.job_gates for select to tickq_worker using (true);

create policy job_gates_table_owner on tickq.job_gates
    to current_user using (true) with check (true);

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
--
-- Concurrent enqueues of one key take turns on a transaction-level advisory lock of the
-- key: the second waits until the first commits (or rolls back), then sees its job, so no
-- update is lost and no second job is made. A lock rather than a row of the key's: a
-- key's first enqueue has no row to lock yet. Hash collisions only make two keys take turns.
-- Security definer, so applications need no write grant on the gates; only the caller's
-- own key (per owner, above) and jobs of that owner are touched, whatever id a direct
-- caller passes.
create function tickq.job_gate(
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

-- The debounce or throttle that made one job of any user, for the operator's detail view
-- (debounced N times): its kind and count, never its key, which is the user's own text.
create function tickq.operator_job_gate(p_id uuid)
    returns table (kind text, enqueues integer)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select g.kind, g.enqueues from tickq.job_gates g where g.job_id = p_id
$$;

drop function tickq.enqueue(text, jsonb, text, text, integer, timestamptz, integer, text);

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
    if v_kind is not null then
        select g.job_id, g.outcome, g.run_after into v_gated
        from tickq.job_gate(v_kind, coalesce(enqueue.debounce_key, enqueue.throttle_key),
                            v_owner, coalesce(enqueue.debounce_seconds, enqueue.throttle_seconds),
                            enqueue.debounce_max_seconds, v_payload, null, v_id) g;
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

-- Enqueue from SQL (a trigger, an RPC, another language): applications and workers. It
-- runs with the caller's own rights, so the grants and row-level security above decide.
revoke all on function tickq.enqueue(text, jsonb, text, text, integer, timestamptz, integer,
                                     text, text, double precision, double precision, text,
                                     double precision) from public;
grant execute on function tickq.enqueue(text, jsonb, text, text, integer, timestamptz,
                                        integer, text, text, double precision,
                                        double precision, text, double precision)
    to tickq_app, tickq_worker;

-- Debounce and throttle: every gated enqueue (tickq.enqueue, the Python store's) asks it.
revoke all on function tickq.job_gate(text, text, uuid, double precision, double precision,
                                      jsonb, timestamptz, uuid) from public;
grant execute on function tickq.job_gate(text, text, uuid, double precision, double precision,
                                         jsonb, timestamptz, uuid) to tickq_app, tickq_worker;
revoke all on function tickq.operator_job_gate(uuid) from public;
grant execute on function tickq.operator_job_gate(uuid) to tickq_operator, tickq_worker;

-- Applications may change a job only through the documented operations
-- (docs/threat-model.md), each one a set of columns it may move and how: debounce a job of
-- a debounce's key that has not started (tickq.job_gate), cancel a job not yet running (a waiting one with an error naming the failed ancestor when the cascade of
-- tickq.jobs_settle does it), ask a running job to cancel, send a dead or cancelled job back
-- to the queue with fresh attempts, mark a parent as having children, deliver a signal, and
-- forget a finished job's wait and signals before a fresh retry. The guard compares the
-- whole row (every column, those added later too): an update that moves any column its
-- operation does not list raises insufficient_privilege, so no sequence of statements can
-- combine two operations' freedoms. Every time written must be one a worker can read back
-- (tickq.readable_time), and a job holds at most 100 signals.
--
-- Its trigger's condition (jobs_app_guard, triggers.sql) is only its gate, an application
-- user's transaction (tickq.user_id set): PostgreSQL reads a row trigger's condition back
-- from its stored text and compiles it for every statement that updates the table, whoever
-- runs it, so a longer condition cost every worker's batch about 4 % of its server time at
-- batch 100 (docs/benchmarks.md, "Server work per job"). A PL/pgSQL body is compiled once
-- per session instead.
create or replace function tickq.jobs_app_guard() returns trigger
    language plpgsql
    as $$
declare
    v_old   jsonb := to_jsonb(old);
    v_moved text[];
    v_sent  text;
begin
    select coalesce(array_agg(n.key order by n.key), '{}') into v_moved
    from jsonb_each(to_jsonb(new)) n
    where n.value is distinct from v_old -> n.key;
    if v_moved = '{}' then
        return new;
    end if;
    if not (tickq.readable_time(new.run_after) and tickq.readable_time(new.updated_at)
            and tickq.readable_time(new.finished_at)
            and tickq.readable_time(new.wait_until)) then
        raise exception 'tickq: a job''s times must be finite dates of the years 1-9999'
            using errcode = 'TQ422', detail = 'run_after';
    end if;
    -- Deliver a signal: one new name appended to a live job's signals; the job wakes
    -- (run_after earlier) only if it waits for that very name.
    v_sent := new.signals[cardinality(new.signals)];
    if (v_moved <@ array['signals', 'run_after', 'updated_at']
        and 'signals' = any(v_moved)
        and old.status in ('waiting', 'queued', 'running', 'retrying')
        and new.signals = coalesce(old.signals, '{}') || v_sent
        and not v_sent = any(coalesce(old.signals, '{}'))
        and (not 'run_after' = any(v_moved)
             or (old.status in ('queued', 'retrying') and old.wait_kind = 'signal'
                 and old.wait_name = v_sent and new.run_after < old.run_after))) is true then
        if cardinality(new.signals) > 100 then
            raise exception 'tickq: a job holds at most 100 signals'
                using errcode = 'TQ422', detail = 'signal';
        end if;
        return new;
    end if;
    -- Forget a finished job's wait and signals (before a fresh retry).
    if (v_moved <@ array['resumes', 'wait_kind', 'wait_name', 'wait_until', 'signals']
        and old.status in ('dead', 'cancelled')
        and new.resumes is null and new.wait_kind is null and new.wait_name is null
        and new.wait_until is null and new.signals is null) is true then
        return new;
    end if;
    -- Cancel a job not yet running; the error only as the dependency cascade writes it,
    -- naming a failed job of this owner.
    if (v_moved <@ array['status', 'finished_at', 'updated_at', 'cancel_requested', 'error']
        and new.status = 'cancelled' and old.status in ('queued', 'retrying', 'waiting')
        and not new.cancel_requested and new.finished_at is not null
        and (not 'error' = any(v_moved)
             or (old.status = 'waiting'
                 and new.error ~ '^parent [0-9a-f-]{36} is (dead|cancelled)$'
                 and exists (select from tickq.jobs r
                             where r.id = substr(new.error, 8, 36)::uuid
                               and r.status in ('dead', 'cancelled'))))) is true then
        return new;
    end if;
    -- Ask a running job to cancel.
    if (v_moved <@ array['cancel_requested', 'updated_at'] and old.status = 'running'
        and new.cancel_requested) is true then
        return new;
    end if;
    -- Send a dead or cancelled job back to the queue with fresh attempts.
    if (v_moved <@ array['status', 'attempts', 'run_after', 'cancel_requested', 'finished_at',
                         'updated_at']
        and new.status = 'queued' and old.status in ('dead', 'cancelled')
        and new.attempts = 0 and not new.cancel_requested and new.finished_at is null
        and new.run_after <= now() + interval '366 days') is true then
        return new;
    end if;
    -- Debounce: a queued job a debounce made, not started yet, takes a new payload (a JSON
    -- object) and run time.
    if (v_moved <@ array['payload', 'run_after', 'updated_at']
        and old.status = 'queued' and old.started_at is null
        and jsonb_typeof(new.payload) = 'object'
        and exists (select from tickq.job_gates g
                    where g.job_id = old.id and g.kind = 'debounce')) is true then
        return new;
    end if;
    -- Mark a parent as having children.
    if (v_moved = array['has_children'] and new.has_children) is true then
        return new;
    end if;
    raise exception 'tickq: applications may only cancel or retry jobs (% -> %, changing %)',
        old.status, new.status, array_to_string(v_moved, ', ')
        using errcode = 'insufficient_privilege';
end $$;

-- A deleted job takes its key, steps, signals, dependency edges and gate with it, as foreign keys'
-- cascades would (a partitioned tickq.jobs cannot be referenced by id alone). A statement
-- trigger with the deleted rows (jobs_forget, triggers.sql): one set-based delete per table
-- and statement, and nothing at all for statements that delete no job. Security definer,
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
