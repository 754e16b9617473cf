-- Applications may change a job only through the documented operations: cancel a job not
-- yet running (a waiting one too, with an error naming the failed parent when a cascade
-- does it), ask a running job to cancel, send a dead or cancelled job back to the queue,
-- mark a parent as having children, deliver a signal, and forget a finished job's wait and
-- signals before a fresh retry. Anything else raises insufficient_privilege.
--
-- Its trigger's condition (jobs_app_guard, triggers.sql) is only its gate, an application
-- user's transaction (tickq.user_id set): PostgreSQL reads a row trigger's condition back
-- from its stored text and compiles it for every statement that updates the table, whoever
-- runs it, so a longer condition cost every worker's batch about 4 % of its server time at
-- batch 100 (docs/benchmarks.md, "Server work per job"). A PL/pgSQL body is compiled once
-- per session instead.
--
-- The first test below must stay first (the security tests of signals and retries fail
-- without it).
create function tickq.jobs_app_guard() returns trigger
    language plpgsql
    as $$
begin
    -- Delivering a signal, or forgetting a finished job's wait and signals: only when the
    -- test is true, never when it is null (on a job waiting for no signal, wait_kind null,
    -- naming any signal and moving run_after earlier would make it run early). Every
    -- update the API makes is true here, never null.
    if (new.status = old.status and new.attempts = old.attempts
        and new.cancel_requested = old.cancel_requested
        and new.finished_at is not distinct from old.finished_at
        and new.error is not distinct from old.error
        and (
            (new.signals is distinct from old.signals
             and (new.run_after = old.run_after
                  or (new.run_after < old.run_after and old.wait_kind = 'signal'
                      and old.wait_name = any(new.signals))))
            or (new.status in ('dead', 'cancelled') and new.run_after = old.run_after
                and new.resumes is null and new.wait_kind is null
                and new.wait_name is null and new.wait_until is null
                and new.signals is null))) is true then
        return new;
    end if;
    -- Cancel, ask to cancel, retry, mark a parent.
    if new.status = 'cancelled' and old.status in ('queued', 'retrying', 'waiting')
       and new.attempts = old.attempts then
        return new;
    elsif new.status = 'running' and old.status = 'running' and new.cancel_requested
       and new.attempts = old.attempts and new.run_after = old.run_after then
        return new;
    elsif new.status = 'queued' and old.status in ('dead', 'cancelled') and new.attempts = 0
       and not new.cancel_requested then
        return new;
    elsif new.status = old.status and new.has_children and not old.has_children
       and new.attempts = old.attempts and new.run_after = old.run_after
       and new.finished_at is not distinct from old.finished_at
       and new.cancel_requested = old.cancel_requested
       and new.error is not distinct from old.error then
        return new;
    end if;
    raise exception 'tickq: applications may only cancel or retry jobs (% -> %)',
        old.status, new.status
        using errcode = 'insufficient_privilege';
end $$;
