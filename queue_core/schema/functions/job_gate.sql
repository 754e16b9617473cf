-- Debounce and throttle (queue_core/model/gates.py): which job an enqueue of a gate's key lands
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

-- Debounce and throttle: every gated enqueue (tickq.enqueue_job, the Python store's) asks
-- it. tickq.job_gate takes an owner and a clock: the workers' alone; an application's
-- gated enqueue is tickq.enqueue_many's.
revoke all on function tickq.job_gate(text, text, uuid, double precision, double precision, jsonb, timestamptz, uuid) from public;
grant execute on function tickq.job_gate(text, text, uuid, double precision, double precision, jsonb, timestamptz, uuid) to tickq_worker;
