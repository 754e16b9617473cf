-- The application guard's trigger condition is only its gate: an application user's
-- transaction (tickq.user_id set). The changes migration 0008 let past the guard in that
-- condition (delivering a signal; forgetting a finished job's wait and signals before a
-- fresh retry) are let past by the guard function itself, first, with the same test, less
-- the gap a null in it left (below).
--
-- Why: PostgreSQL reads a row trigger's condition back from its stored text and compiles it
-- for every statement that updates the table, whoever runs it. Workers never pass the gate,
-- yet each of their batch statements (a claim and a finish, both updates of tickq.jobs)
-- paid for reading and compiling the whole 0008 condition, about 4 % of the batch's server
-- time at batch 100 (docs/benchmarks.md, "Server work per job"). A PL/pgSQL body is compiled
-- once per session instead. Nothing else changes for applications: the updates the API
-- makes pass, the same others are refused.
--
-- A later version of tickq.jobs_app_guard must keep the first test below (the security
-- tests of signals and retries fail without it).
create or replace function tickq.jobs_app_guard() returns trigger
    language plpgsql
    as $$
begin
    -- Migration 0008's exemptions, word for word, but only when true. The trigger condition
    -- they came from also let an update through when they were null: on a job waiting for
    -- no signal (wait_kind null), naming any signal and moving run_after earlier made an
    -- application's job run early. Every update the API makes is true here, never null.
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
    -- Migration 0009's guard, unchanged.
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

-- Dropped and made again on the partitioned table: its partitions' clones follow, and day
-- partitions attached later get the new one.
drop trigger jobs_app_guard on tickq.jobs;
create trigger jobs_app_guard before update on tickq.jobs
    for each row when (coalesce(current_setting('tickq.user_id', true), '') <> '')
    execute function tickq.jobs_app_guard();
