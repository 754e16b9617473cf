-- Durable steps (queue_core/steps.py): a job's completed steps, the signals sent to it, and
-- on the job what its last suspension waits for.

-- Kept on the job, read only by the step statements and the views of one job, never by the
-- claim: a plain job stores four nulls (one bit each in the row's null bitmap) and no
-- statement of its life reads them.
alter table tickq.jobs
    add column resumes integer,           -- times the job suspended and came back (null: 0)
    add column wait_kind text,            -- what the last suspension waits for
    add column wait_name text,            -- the sleep's or the awaited signal's name
    add column wait_until timestamptz,    -- wake time, or the signal's timeout
    -- Names of the signals delivered to the job. On the row, not only in job_signals, so a
    -- suspension racing a signal sees it: both write this row, and PostgreSQL re-reads the
    -- row (not other tables) when an update waits for another's lock.
    add column signals text[],
    add constraint jobs_wait_kind_check check (wait_kind in ('suspend', 'sleep', 'signal'));

-- One row per completed step. The primary key makes a step's result stored at most once,
-- and serves the cascade when retention deletes the job.
create table tickq.job_steps (
    job_id      uuid not null references tickq.jobs (id) on delete cascade,
    name        text not null,
    result      jsonb,
    size        integer not null,
    finished_at timestamptz not null,
    primary key (job_id, name),
    constraint job_steps_name_check check (name <> '')
);

create table tickq.job_signals (
    job_id  uuid not null references tickq.jobs (id) on delete cascade,
    name    text not null,
    payload jsonb,
    size    integer not null,
    sent_at timestamptz not null,
    primary key (job_id, name),
    constraint job_signals_name_check check (name <> '')
);

-- Row-level security as on tickq.jobs: applications see the steps and signals of their
-- own jobs and may send signals to them; workers see and write everything.
grant select, insert, update, delete on tickq.job_steps, tickq.job_signals to tickq_worker;
grant select, delete on tickq.job_steps to tickq_app;
grant select, insert, delete on tickq.job_signals to tickq_app;
-- Sending a signal appends to `signals`; a fresh retry clears the rest.
grant update (resumes, wait_kind, wait_name, wait_until, signals) on tickq.jobs to tickq_app;

alter table tickq.job_steps enable row level security;
alter table tickq.job_signals enable row level security;

create policy job_steps_owner on tickq.job_steps for select to tickq_app
    using (exists (select from tickq.jobs j
                   where j.id = job_id and j.user_id = tickq.current_user_id()));
-- Only a finished job's steps may go (a fresh retry); a live job's progress stays.
create policy job_steps_owner_clear on tickq.job_steps for delete to tickq_app
    using (exists (select from tickq.jobs j
                   where j.id = job_id and j.user_id = tickq.current_user_id()
                     and j.status in ('dead', 'cancelled')));
create policy job_steps_worker on tickq.job_steps to tickq_worker using (true) with check (true);

create policy job_signals_owner on tickq.job_signals for select to tickq_app
    using (exists (select from tickq.jobs j
                   where j.id = job_id and j.user_id = tickq.current_user_id()));
create policy job_signals_owner_send on tickq.job_signals for insert to tickq_app
    with check (exists (select from tickq.jobs j
                        where j.id = job_id and j.user_id = tickq.current_user_id()));
create policy job_signals_owner_clear on tickq.job_signals for delete to tickq_app
    using (exists (select from tickq.jobs j
                   where j.id = job_id and j.user_id = tickq.current_user_id()
                     and j.status in ('dead', 'cancelled')));
create policy job_signals_worker on tickq.job_signals to tickq_worker
    using (true) with check (true);

-- Row-level security binds the tables' owner too (as migration 0007 does for tickq.jobs):
-- the owner keeps every row, so workers and migrations logging in as the owner work.
alter table tickq.job_steps force row level security;
alter table tickq.job_signals force row level security;
do $$
declare
    owner name := (select r.rolname from pg_class c join pg_roles r on r.oid = c.relowner
                   where c.oid = 'tickq.job_steps'::regclass);
begin
    execute format('create policy job_steps_table_owner on tickq.job_steps to %I'
                   ' using (true) with check (true)', owner);
    execute format('create policy job_signals_table_owner on tickq.job_signals to %I'
                   ' using (true) with check (true)', owner);
end $$;

-- The application guard (tickq.jobs_app_guard, migrations 0002 and later) lets applications
-- only cancel or retry. Two more changes are theirs with durable steps, and are let past the
-- guard by its trigger's condition rather than by a new version of the function, so
-- migrations that extend the function keep them:
-- * delivering a signal: append its name to `signals`, and make the job runnable now only
--   when it waits for that signal; nothing else of the job changes;
-- * before a fresh retry, forgetting a finished job's wait and signals (setting them null).
-- The column grants above bound what else such an update could touch.
drop trigger jobs_app_guard on tickq.jobs;
create trigger jobs_app_guard before update on tickq.jobs
    for each row when (
        coalesce(current_setting('tickq.user_id', true), '') <> ''
        and not (
            new.status = old.status and new.attempts = old.attempts
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
                    and new.signals is null))))
    execute function tickq.jobs_app_guard();
