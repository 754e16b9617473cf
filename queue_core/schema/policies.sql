-- Who may do what with the tables: row-level security and the tables' grants. Applied last,
-- once the tables and functions exist (docs/threat-model.md says what each rule defends
-- against). The roles are made first (roles.sql); who may run a function is in its file.

grant usage on schema tickq to tickq_app, tickq_worker, tickq_operator;

-- The jobs. Workers read and write every row. Applications read their own rows and write
-- none: every change an application makes goes through a security-definer function that
-- takes the owner from the session and the time from the database (tickq.enqueue_many,
-- tickq.cancel, tickq.retry, tickq.signal, tickq.publish; each file grants them), and those
-- functions' writes are still checked row by row by tickq.jobs_app_guard and the admission
-- trigger, which fire on a user's transaction whoever runs the statement.
grant select, insert, update, delete on tickq.jobs to tickq_worker;
grant select on tickq.jobs to tickq_app;

-- Row-level security binds the table's owner too (force): one master login for
-- migrations, workers and the API is common on small managed databases, and an owner that
-- RLS skipped would read every user's jobs through the API. The owner keeps every row
-- through a policy of its own (below), so workers and migrations that log in as the owner,
-- and the security-definer functions (which run as the owner), see everything.
alter table tickq.jobs enable row level security;
alter table tickq.jobs force row level security;

create policy jobs_owner on tickq.jobs to tickq_app
    using (user_id = tickq.current_user_id())
    with check (user_id = tickq.current_user_id());

-- A policy rather than BYPASSRLS: granting BYPASSRLS needs a superuser, which managed
-- databases (RDS, Supabase) do not hand out.
create policy jobs_worker on tickq.jobs to tickq_worker using (true) with check (true);

-- Idempotency keys: an application user reads only its own keys (so it cannot learn
-- whether another user's key exists); its enqueues take them (tickq.enqueue_many), and keys
-- are freed by the triggers, which run as the owner.
grant select, insert, delete on tickq.job_keys to tickq_worker;
grant select on tickq.job_keys to tickq_app;

alter table tickq.job_keys enable row level security;
alter table tickq.job_keys force row level security;

create policy job_keys_owner on tickq.job_keys to tickq_app
    using (user_id = tickq.current_user_id())
    with check (user_id = tickq.current_user_id());
create policy job_keys_worker on tickq.job_keys to tickq_worker using (true) with check (true);

-- Steps and signals as the jobs: applications see the steps and signals of their own jobs
-- (signals are sent by tickq.signal, a fresh retry's forgetting is tickq.retry's). Workers
-- see and write everything.
grant select, insert, update, delete on tickq.job_steps, tickq.job_signals to tickq_worker;
grant select on tickq.job_steps, tickq.job_signals to tickq_app;

alter table tickq.job_steps enable row level security;
alter table tickq.job_signals enable row level security;
alter table tickq.job_steps force row level security;
alter table tickq.job_signals force row level security;

create policy job_steps_owner on tickq.job_steps for select to tickq_app
    using (exists (select from tickq.jobs j
                   where j.id = job_id and j.user_id = tickq.current_user_id()));
create policy job_steps_worker on tickq.job_steps to tickq_worker using (true) with check (true);

create policy job_signals_owner on tickq.job_signals for select to tickq_app
    using (exists (select from tickq.jobs j
                   where j.id = job_id and j.user_id = tickq.current_user_id()));
create policy job_signals_worker on tickq.job_signals to tickq_worker
    using (true) with check (true);

-- Gates: tickq.job_gate (security definer, run as the owner) writes them; an application
-- user reads its own jobs' gates (their views), a worker everything.
grant select on tickq.job_gates to tickq_app, tickq_worker;

alter table tickq.job_gates enable row level security;
alter table tickq.job_gates force row level security;

create policy job_gates_owner on tickq.job_gates for select to tickq_app
    using (user_id = tickq.current_user_id());
create policy job_gates_worker on tickq.job_gates for select to tickq_worker using (true);

-- Dependency edges: an application user sees only edges of its own jobs; its enqueues
-- write them (tickq.enqueue_job checks that both ends are the owner's, and so does the
-- trigger job_dependencies_app_admit).
grant select, insert, delete on tickq.job_dependencies to tickq_worker;
grant select on tickq.job_dependencies to tickq_app;

alter table tickq.job_dependencies enable row level security;
alter table tickq.job_dependencies force row level security;

create policy job_dependencies_owner on tickq.job_dependencies to tickq_app
    using (user_id = tickq.current_user_id())
    with check (user_id = tickq.current_user_id());
create policy job_dependencies_worker on tickq.job_dependencies to tickq_worker
    using (true) with check (true);

-- Settlements being worked off: written only by the statement that finishes or cancels a
-- parent (an application user's cancel runs in tickq.cancel), worked off by the workers.
-- Applications see their own.
grant select, insert, update, delete on tickq.job_settlements to tickq_worker;
grant select on tickq.job_settlements to tickq_app;

alter table tickq.job_settlements enable row level security;
alter table tickq.job_settlements force row level security;

create policy job_settlements_owner on tickq.job_settlements to tickq_app
    using (user_id = tickq.current_user_id())
    with check (user_id = tickq.current_user_id());
create policy job_settlements_worker on tickq.job_settlements to tickq_worker
    using (true) with check (true);

-- The outbox: workers publish every event and mark it published. An application user
-- reads only its own events and adds only its own through tickq.publish: never under
-- tickq's sources or for a job (tickq's lifecycle events, which consumers trust), never
-- already published; it neither updates nor deletes one, so it can neither forge another
-- owner's event nor hide or resend one. A new event's job lifecycle rows come from the
-- trigger jobs_outbox_dead and the finish, as the schema owner or a worker.
grant select, insert, update, delete on tickq.outbox to tickq_worker;
grant select on tickq.outbox to tickq_app;

alter table tickq.outbox enable row level security;
alter table tickq.outbox force row level security;

create policy outbox_owner on tickq.outbox for select to tickq_app
    using (user_id = tickq.current_user_id());
create policy outbox_worker on tickq.outbox to tickq_worker using (true) with check (true);

-- Step tries, undos and child links as the steps: applications see those of their own
-- jobs; workers see and write everything.
grant select, insert, update, delete on tickq.job_step_tries, tickq.job_children
    to tickq_worker;
grant select on tickq.job_step_tries, tickq.job_children to tickq_app;

alter table tickq.job_step_tries enable row level security;
alter table tickq.job_children enable row level security;
alter table tickq.job_step_tries force row level security;
alter table tickq.job_children force row level security;

create policy job_step_tries_owner on tickq.job_step_tries for select to tickq_app
    using (exists (select from tickq.jobs j
                   where j.id = job_id and j.user_id = tickq.current_user_id()));
create policy job_step_tries_worker on tickq.job_step_tries to tickq_worker
    using (true) with check (true);
create policy job_children_owner on tickq.job_children for select to tickq_app
    using (user_id = tickq.current_user_id());
create policy job_children_worker on tickq.job_children to tickq_worker
    using (true) with check (true);

-- The owner of each table that forces row-level security keeps every row of it.
do $$
declare
    v_table text;
begin
    foreach v_table in array array['jobs', 'job_keys', 'job_steps', 'job_signals',
                                   'job_dependencies', 'job_settlements',
                                   'job_gates', 'outbox',
                                   'job_step_tries', 'job_children'] loop
        execute format('create policy %I on tickq.%I to %I using (true) with check (true)',
                       v_table || '_table_owner', v_table,
                       (select r.rolname from pg_class c join pg_roles r on r.oid = c.relowner
                        where c.oid = ('tickq.' || v_table)::regclass));
    end loop;
end $$;

-- The other tables are the workers'. Every enqueuer (applications included) checks whether
-- limits exist, which are not secret; a claim on an application login (a user's own jobs)
-- reads which queues are paused.
grant select, insert, update, delete on tickq.schedules, tickq.type_limits,
    tickq.queue_limits, tickq.queue_group_limits, tickq.retention_policies,
    tickq.queue_pauses to tickq_worker;
grant select, insert, delete on tickq.queue_depth_samples to tickq_worker;
grant select on tickq.type_limits, tickq.queue_limits, tickq.queue_group_limits to tickq_app;
grant select (queue) on tickq.queue_pauses to tickq_app;

-- Flow limits and holds are the workers' (a handler holds its key); the starts of
-- rate-limited keys are written by the claim, which runs as the worker. Applications read
-- none of them (a hold names another owner's key): they learn only whether any limit or
-- hold exists (tickq.flow_active), as the store's probe asks.
grant select, insert, update, delete on tickq.flow_limits, tickq.flow_holds,
    tickq.flow_starts to tickq_worker;
revoke all on function tickq.flow_active(), tickq.flow_limit_of(text),
    tickq.flow_blocked(timestamptz), tickq.flow_admit(uuid[], timestamptz),
    tickq.flow_log(text[], timestamptz),
    tickq.claim_flow(text[], integer, integer, timestamptz, uuid) from public;
revoke all on function tickq.flow_job_waits(uuid) from public;
grant execute on function tickq.flow_active(), tickq.flow_job_waits(uuid)
    to tickq_app, tickq_worker;
grant execute on function tickq.flow_limit_of(text), tickq.flow_blocked(timestamptz),
    tickq.flow_admit(uuid[], timestamptz), tickq.flow_log(text[], timestamptz),
    tickq.claim_flow(text[], integer, integer, timestamptz, uuid) to tickq_worker;

-- The task catalogue: workers publish and read it; applications read it (the settings of
-- the types they may enqueue are no secret, and their enqueues apply them).
grant select, insert, update, delete on tickq.task_catalog to tickq_worker;
grant select on tickq.task_catalog to tickq_app;

-- Flow limits and holds are the workers' (a handler holds its key); the starts of
-- rate-limited keys are written by the claim, which runs as the worker. Applications read
-- none of them (a hold names another owner's key): they learn only whether any limit or
-- hold exists (tickq.flow_active), as the store's probe asks.
grant select, insert, update, delete on tickq.flow_limits, tickq.flow_holds,
    tickq.flow_starts to tickq_worker;

-- Each function's grants are in its own file (schema/functions/<name>.sql), after its
-- CREATE: applied with it, so a function re-created by an upgrade gets them again.
