-- Applications may change a job only through the documented operations
-- (docs/threat-model.md), each one a set of columns it may move and how: debounce a job of
-- a debounce's key that has not started (tickq.job_gate), cancel a job not yet running (a waiting one with an error naming the failed ancestor when the cascade of
-- tickq.jobs_settle does it; a saga that owes undos compensates first), ask a running job
-- to cancel, send a dead or cancelled job back
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
    -- Cancel a saga not running that owes undos: it stays as it is, but runnable at once
    -- with the attempts its compensation needs (tickq.job_compensation_spare, read before
    -- the compensation's row is written in the same statement), or, compensating already,
    -- untouched but for the time. The max_attempts declared and the attempts counted are
    -- kept for the views, as the first compensation left them.
    if (v_moved <@ array['run_after', 'max_attempts', 'declared_max_attempts',
                         'compensation_attempts', 'updated_at']
        and new.status = old.status and old.status in ('queued', 'retrying')
        and not new.cancel_requested
        and case when v_moved <@ array['updated_at']
                 then tickq.job_compensation_spare(old.id) is null
                 else tickq.job_compensation_spare(old.id) > 0
                      and new.run_after <= old.run_after
                      and new.max_attempts = greatest(
                          old.max_attempts, old.attempts + tickq.job_compensation_spare(old.id))
                      and new.declared_max_attempts
                          = coalesce(old.declared_max_attempts, old.max_attempts)
                      and new.compensation_attempts
                          = coalesce(old.compensation_attempts, old.attempts)
            end) is true then
        return new;
    end if;
    -- Ask a running job to cancel.
    if (v_moved <@ array['cancel_requested', 'updated_at'] and old.status = 'running'
        and new.cancel_requested) is true then
        return new;
    end if;
    -- Send a dead or cancelled job back to the queue with fresh attempts (a compensation's
    -- count of them forgotten with them, and the max_attempts it raised back to the one
    -- declared).
    if (v_moved <@ array['status', 'attempts', 'max_attempts', 'declared_max_attempts',
                         'compensation_attempts', 'run_after', 'cancel_requested',
                         'finished_at', 'updated_at']
        and new.status = 'queued' and old.status in ('dead', 'cancelled')
        and new.attempts = 0 and new.compensation_attempts is null
        and new.max_attempts = coalesce(old.declared_max_attempts, old.max_attempts)
        and new.declared_max_attempts is null
        and not new.cancel_requested and new.finished_at is null
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
