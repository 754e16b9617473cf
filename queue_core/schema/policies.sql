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

-- The jobs. Workers read and write every row. Applications insert only what a request may
-- set (status, attempts and leases take defaults; a restrictive policy below keeps the
-- inserted status to the two an enqueue may choose), and update only the columns of the
-- documented operations, each update checked row by row by tickq.jobs_app_guard.
grant select, insert, update, delete on tickq.jobs to tickq_worker;
grant select on tickq.jobs to tickq_app;
grant insert (id, queue, type, user_id, payload, idempotency_key, max_attempts, priority,
              created_at, updated_at, traceparent,
              run_after, lease_seconds, backoff_base, backoff_factor, backoff_max,
              backoff_jitter,
              status, pending_parents, has_children, group_key)
    on tickq.jobs to tickq_app;
grant update (status, attempts, run_after, updated_at, finished_at, cancel_requested,
              -- sending a signal appends to `signals`; a fresh retry clears the rest
              resumes, wait_kind, wait_name, wait_until, signals,
              -- marking a parent, cancelling a waiting child with its parent's failure
              has_children, error,
              -- cancelling a saga: the attempts its undos need (tickq.jobs_app_guard)
              max_attempts)
    on tickq.jobs to tickq_app;

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

create policy jobs_app_insert_status on tickq.jobs as restrictive for insert to tickq_app
    with check (status in ('queued', 'waiting'));

-- Idempotency keys: an application user claims and reads only its own keys (so it cannot
-- learn whether another user's key exists); keys are freed by the triggers, which run as
-- the owner, so applications never delete a key row themselves.
grant select, insert, delete on tickq.job_keys to tickq_worker;
grant select, insert on tickq.job_keys to tickq_app;

alter table tickq.job_keys enable row level security;
alter table tickq.job_keys force row level security;

create policy job_keys_owner on tickq.job_keys to tickq_app
    using (user_id = tickq.current_user_id())
    with check (user_id = tickq.current_user_id());
create policy job_keys_worker on tickq.job_keys to tickq_worker using (true) with check (true);

-- Steps and signals as the jobs: applications see the steps and signals of their own jobs
-- and may send signals to them; only a finished job's steps and signals may go (a fresh
-- retry), a live job's progress stays. Workers see and write everything.
grant select, insert, update, delete on tickq.job_steps, tickq.job_signals to tickq_worker;
grant select, delete on tickq.job_steps to tickq_app;
grant select, insert, delete on tickq.job_signals to tickq_app;

alter table tickq.job_steps enable row level security;
alter table tickq.job_signals enable row level security;
alter table tickq.job_steps force row level security;
alter table tickq.job_signals force row level security;

create policy job_steps_owner on tickq.job_steps for select to tickq_app
    using (exists (select from tickq.jobs j
                   where j.id = job_id and j.user_id = tickq.current_user_id()));
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

-- Gates: tickq.job_gate (security definer, run as the owner) writes them; an application
-- user reads its own jobs' gates (their views), a worker everything.
grant select on tickq.job_gates to tickq_app, tickq_worker;

alter table tickq.job_gates enable row level security;
alter table tickq.job_gates force row level security;

create policy job_gates_owner on tickq.job_gates for select to tickq_app
    using (user_id = tickq.current_user_id());
create policy job_gates_worker on tickq.job_gates for select to tickq_worker using (true);

-- Dependency edges: an application user sees and writes only edges of its own jobs. That
-- both ends are its own is checked by the enqueue, which reads the parents under row-level
-- security (jobs_parents_lock): a policy cannot check it, since the ends are usually
-- inserted by the same statement as the edge, and a policy's subquery does not see them.
grant select, insert, delete on tickq.job_dependencies to tickq_worker;
grant select, insert on tickq.job_dependencies to tickq_app;

alter table tickq.job_dependencies enable row level security;
alter table tickq.job_dependencies force row level security;

create policy job_dependencies_owner on tickq.job_dependencies to tickq_app
    using (user_id = tickq.current_user_id())
    with check (user_id = tickq.current_user_id());
create policy job_dependencies_worker on tickq.job_dependencies to tickq_worker
    using (true) with check (true);

-- Settlements being worked off: written by the statement that finishes or cancels a parent
-- (an application user's cancel too, for its own parent), worked off by the workers.
grant select, insert, update, delete on tickq.job_settlements to tickq_worker;
grant select, insert, update, delete on tickq.job_settlements to tickq_app;

alter table tickq.job_settlements enable row level security;
alter table tickq.job_settlements force row level security;

create policy job_settlements_owner on tickq.job_settlements to tickq_app
    using (user_id = tickq.current_user_id())
    with check (user_id = tickq.current_user_id());
create policy job_settlements_worker on tickq.job_settlements to tickq_worker
    using (true) with check (true);

-- The outbox: workers publish every event and mark it published. An application user
-- reads only its own events and inserts only its own (queue_core.publish): never under
-- tickq's source or for a job (tickq's lifecycle events, which consumers trust), never
-- already published or with attempts of its own; it neither updates nor deletes one, so it
-- can neither forge another owner's event nor hide or resend one. A new event's job
-- lifecycle rows come from the trigger jobs_outbox_dead and the finish, as the schema
-- owner or a worker.
grant select, insert, update, delete on tickq.outbox to tickq_worker;
grant select on tickq.outbox to tickq_app;
grant insert (user_id, source, detail_type, detail) on tickq.outbox to tickq_app;

alter table tickq.outbox enable row level security;
alter table tickq.outbox force row level security;

create policy outbox_owner on tickq.outbox for select to tickq_app
    using (user_id = tickq.current_user_id());
create policy outbox_owner_publish on tickq.outbox for insert to tickq_app
    with check (user_id = tickq.current_user_id() and job_id is null
                and source <> 'tickq' and published_at is null and attempts = 0);
create policy outbox_worker on tickq.outbox to tickq_worker using (true) with check (true);

-- Step tries, undos and child links as the steps: applications see those of their own
-- jobs, and only a finished job's may go (a retry that forgets steps); workers see and
-- write everything.
grant select, insert, update, delete on tickq.job_step_tries, tickq.job_children
    to tickq_worker;
grant select, delete on tickq.job_step_tries, tickq.job_children to tickq_app;

alter table tickq.job_step_tries enable row level security;
alter table tickq.job_children enable row level security;
alter table tickq.job_step_tries force row level security;
alter table tickq.job_children force row level security;

create policy job_step_tries_owner on tickq.job_step_tries for select to tickq_app
    using (exists (select from tickq.jobs j
                   where j.id = job_id and j.user_id = tickq.current_user_id()));
create policy job_step_tries_owner_clear on tickq.job_step_tries for delete to tickq_app
    using (exists (select from tickq.jobs j
                   where j.id = job_id and j.user_id = tickq.current_user_id()
                     and j.status in ('dead', 'cancelled')));
create policy job_children_owner_clear on tickq.job_children for delete to tickq_app
    using (exists (select from tickq.jobs j
                   where j.id = parent_id and j.user_id = tickq.current_user_id()
                     and j.status in ('dead', 'cancelled')));
-- A cancel of an application's own saga that is not running records its compensation
-- (jobs_cancel, tickq.job_children_cancel): that row alone, on a job that owes undos.
grant insert on tickq.job_step_tries to tickq_app;
create policy job_step_tries_owner_compensation on tickq.job_step_tries for insert
    to tickq_app
    with check (kind = 'compensation' and name = 'cancelled' and tries = 0
                and done_at is null
                and (error = 'cancelled' or error ~ '^parent [0-9a-f-]{36} is (dead|cancelled)$')
                and exists (select from tickq.jobs j
                            where j.id = job_id and j.user_id = tickq.current_user_id()
                              and j.status in ('queued', 'retrying')));
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

-- Functions that only their triggers, maintenance or the migrator call: nobody else.
revoke all on function tickq.job_keys_free(), tickq.job_keys_take(),
    tickq.job_keys_truncate(), tickq.jobs_forget(), tickq.jobs_forget_all(),
    tickq.outbox_job_dead(),
    tickq.jobs_live_id_statistics(), tickq.job_dependencies_app_admit(),
    tickq.job_signals_app_admit() from public;

-- Workers make and drop day partitions and check queue depth before they enqueue
-- (applications are admitted by the trigger jobs_app_admit instead).
revoke all on function tickq.jobs_partitions_ensure(date, integer),
    tickq.jobs_partition_drop(text), tickq.queue_admit(text[], integer[]),
    tickq.queue_admit_owner(text, uuid, integer) from public;
grant execute on function tickq.jobs_partitions_ensure(date, integer),
    tickq.jobs_partition_drop(text), tickq.queue_admit(text[], integer[]),
    tickq.queue_admit_owner(text, uuid, integer) to tickq_worker;

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
-- tickq.job_gate takes an owner and a clock: the workers' alone. Applications ask
-- tickq.job_gate_app, which takes both from the session and the database.
revoke all on function tickq.job_gate(text, text, uuid, double precision, double precision,
                                      jsonb, timestamptz, uuid) from public;
grant execute on function tickq.job_gate(text, text, uuid, double precision, double precision,
                                         jsonb, timestamptz, uuid) to tickq_worker;
revoke all on function tickq.job_gate_app(text, text, double precision, double precision,
                                          jsonb, uuid) from public;
grant execute on function tickq.job_gate_app(text, text, double precision, double precision,
                                             jsonb, uuid) to tickq_app, tickq_worker;
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
