-- Who may do what: the roles, row-level security and every grant. Applied last, once the
-- tables and functions exist (docs/threat-model.md says what each rule defends against).

-- Roles. Applications log in as (a member of) tickq_app and see only the rows of the user
-- they name for the current transaction with set_config('tickq.user_id', ..., true);
-- workers log in as (a member of) tickq_worker and see every row; operators (tickq_operator)
-- call the narrow console functions and touch no row otherwise. Roles belong to the whole
-- cluster: made here only when missing.
do $$
declare
    v_role text;
begin
    foreach v_role in array array['tickq_app', 'tickq_worker', 'tickq_operator'] loop
        begin
            if not exists (select from pg_roles where rolname = v_role) then
                execute format('create role %I nologin', v_role);
            end if;
        exception when duplicate_object or unique_violation then
            null;  -- another database on this cluster created it at the same moment
        end;
    end loop;
end $$;

-- The migrating login (usually the owner) may act as tickq_app, so an API pointed at the
-- migrations' secret can still drop to the application role (tickq.act_as_app). Skipped
-- where this login may not grant roles; the API then refuses to serve on it rather than
-- leak.
do $$
begin
    if not pg_has_role(current_user, 'tickq_app', 'MEMBER') then
        execute format('grant tickq_app to %I', current_user);
    end if;
exception when insufficient_privilege or invalid_grant_operation then
    raise notice 'tickq: % may not act as tickq_app; grant it to the API login', current_user;
end $$;

grant usage on schema tickq to tickq_app, tickq_worker, tickq_operator;

-- The jobs. Workers read and write every row. Applications read their own rows and write
-- none: every change an application makes goes through a security-definer function that
-- takes the owner from the session and the time from the database (tickq.enqueue_many,
-- tickq.cancel, tickq.retry, tickq.signal, tickq.publish; grants at the end), and those
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

-- Functions that only their triggers, maintenance or the migrator call: nobody else.
revoke all on function tickq.job_keys_free(), tickq.job_keys_take(),
    tickq.job_keys_truncate(), tickq.jobs_forget(), tickq.jobs_forget_all(),
    tickq.outbox_job_dead(),
    tickq.jobs_live_id_statistics(), tickq.job_dependencies_app_admit(),
    tickq.job_signals_app_admit(), tickq.job_ids_take(), tickq.jobs_id_fixed() from public;

-- Workers make and drop day partitions and check queue depth before they enqueue
-- (applications are admitted by the trigger jobs_app_admit instead).
revoke all on function tickq.jobs_partitions_ensure(date, integer),
    tickq.jobs_partition_drop(text), tickq.queue_admit(text[], integer[]),
    tickq.queue_admit_owner(text, uuid, integer) from public;
grant execute on function tickq.jobs_partitions_ensure(date, integer),
    tickq.jobs_partition_drop(text), tickq.queue_admit(text[], integer[]),
    tickq.queue_admit_owner(text, uuid, integer) to tickq_worker;

-- The application login's whole write surface: these security-definer functions, each
-- taking the owner from the session and the time from the database and checking every
-- argument (docs/threat-model.md lists them with their bounds). Workers may call them too.
revoke all on function tickq.enqueue_many(jsonb, jsonb), tickq.cancel(uuid),
    tickq.retry(uuid, boolean, text), tickq.signal(uuid, text, jsonb),
    tickq.publish(text, jsonb, text) from public;
grant execute on function tickq.enqueue_many(jsonb, jsonb), tickq.cancel(uuid),
    tickq.retry(uuid, boolean, text), tickq.signal(uuid, text, jsonb),
    tickq.publish(text, jsonb, text) to tickq_app, tickq_worker;

-- What those functions run, which take an owner or a clock as arguments: the workers'
-- alone (tickq.enqueue's trusted path, the store's statements).
revoke all on function tickq.enqueue_job(uuid, jsonb, uuid[], integer, jsonb, boolean),
    tickq.enqueue_rows(tickq.jobs[]),
    tickq.jobs_cancel(uuid[], timestamptz, uuid),
    tickq.jobs_retry(text[], uuid[], text[], text[], integer, timestamptz, uuid),
    tickq.job_signals_send(uuid, text, jsonb, integer, integer, integer, timestamptz),
    tickq.job_durable_clear(uuid), tickq.job_steps_forget_from(uuid, text),
    tickq.job_compensation_clear(uuid) from public;
grant execute on function tickq.enqueue_job(uuid, jsonb, uuid[], integer, jsonb, boolean),
    tickq.enqueue_rows(tickq.jobs[]),
    tickq.jobs_cancel(uuid[], timestamptz, uuid),
    tickq.jobs_retry(text[], uuid[], text[], text[], integer, timestamptz, uuid),
    tickq.job_signals_send(uuid, text, jsonb, integer, integer, integer, timestamptz),
    tickq.job_durable_clear(uuid), tickq.job_steps_forget_from(uuid, text),
    tickq.job_compensation_clear(uuid) to tickq_worker;

-- Enqueue from SQL (a trigger, an RPC, another language): applications and workers. It
-- runs with the caller's own rights: a user's enqueue goes on through tickq.enqueue_many.
revoke all on function tickq.enqueue(text, jsonb, text, text, integer, timestamptz, integer,
                                     text, text, double precision, double precision, text,
                                     double precision, text[]) from public;
grant execute on function tickq.enqueue(text, jsonb, text, text, integer, timestamptz,
                                        integer, text, text, double precision,
                                        double precision, text, double precision, text[])
    to tickq_app, tickq_worker;

-- Debounce and throttle: every gated enqueue (tickq.enqueue_job, the Python store's) asks
-- it. tickq.job_gate takes an owner and a clock: the workers' alone; an application's
-- gated enqueue is tickq.enqueue_many's.
revoke all on function tickq.job_gate(text, text, uuid, double precision, double precision,
                                      jsonb, timestamptz, uuid) from public;
grant execute on function tickq.job_gate(text, text, uuid, double precision, double precision,
                                         jsonb, timestamptz, uuid) to tickq_worker;
revoke all on function tickq.job_gates_have_jobs() from public;
revoke all on function tickq.operator_job_gate(uuid) from public;
grant execute on function tickq.operator_job_gate(uuid) to tickq_operator, tickq_worker;

-- The views of one job (its durable side, its parents and children): applications read
-- their own jobs' through row-level security, workers every job's.
revoke all on function tickq.job_durable(uuid), tickq.job_relatives(uuid) from public;
grant execute on function tickq.job_durable(uuid), tickq.job_relatives(uuid)
    to tickq_app, tickq_worker;

-- Operators read counts across every user.
revoke all on function tickq.operator_stats(timestamptz),
    tickq.operator_group_stats(timestamptz) from public;
grant execute on function tickq.operator_stats(timestamptz),
    tickq.operator_group_stats(timestamptz) to tickq_operator;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function
    tickq.queue_pause(text, text, text, timestamptz), tickq.queue_resume(text),
    tickq.queue_pauses_list(), tickq.throughput(timestamptz, integer, text, timestamptz),
    tickq.depth_history(timestamptz, text),
    tickq.operator_jobs(text[], text[], text[], text[], text, timestamptz, timestamptz,
                        timestamptz, uuid, integer),
    tickq.operator_job(uuid), tickq.operator_job_durable(uuid),
    tickq.operator_job_relatives(uuid),
    tickq.operator_retry(uuid[], timestamptz), tickq.operator_cancel(uuid[], timestamptz),
    tickq.operator_count_dead(text[], text[]),
    tickq.operator_retry_dead(text[], text[], bigint, timestamptz),
    tickq.operator_outbox_backlog(timestamptz)
    from public;
grant execute on function
    tickq.queue_pause(text, text, text, timestamptz), tickq.queue_resume(text),
    tickq.queue_pauses_list(), tickq.throughput(timestamptz, integer, text, timestamptz),
    tickq.depth_history(timestamptz, text),
    tickq.operator_jobs(text[], text[], text[], text[], text, timestamptz, timestamptz,
                        timestamptz, uuid, integer),
    tickq.operator_job(uuid), tickq.operator_job_durable(uuid),
    tickq.operator_job_relatives(uuid),
    tickq.operator_retry(uuid[], timestamptz), tickq.operator_cancel(uuid[], timestamptz),
    tickq.operator_count_dead(text[], text[]),
    tickq.operator_retry_dead(text[], text[], bigint, timestamptz),
    tickq.operator_outbox_backlog(timestamptz)
    to tickq_operator, tickq_worker;
