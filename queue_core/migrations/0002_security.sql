-- Two roles. Applications log in as (a member of) tickq_app and see only the rows of the
-- user they name for the current transaction with set_config('tickq.user_id', ..., true);
-- workers log in as (a member of) tickq_worker and see every row.
do $$
begin
    if not exists (select from pg_roles where rolname = 'tickq_app') then
        create role tickq_app nologin;
    end if;
exception when duplicate_object or unique_violation then
    null;  -- another database on this cluster created it at the same moment
end $$;

do $$
begin
    if not exists (select from pg_roles where rolname = 'tickq_worker') then
        create role tickq_worker nologin;
    end if;
exception when duplicate_object or unique_violation then
    null;
end $$;

grant usage on schema tickq to tickq_app, tickq_worker;
grant select, insert, update, delete on tickq.jobs to tickq_worker;
grant select on tickq.jobs to tickq_app;
-- Applications insert only what a request may set; status, attempts and leases take defaults.
grant insert (id, queue, type, user_id, payload, idempotency_key, max_attempts, priority,
              created_at, updated_at,
              run_after, lease_seconds, backoff_base, backoff_factor, backoff_max,
              backoff_jitter)
    on tickq.jobs to tickq_app;
-- Updates are checked row by row by tickq.jobs_app_guard below.
grant update (status, attempts, run_after, updated_at, finished_at, cancel_requested)
    on tickq.jobs to tickq_app;

create function tickq.current_user_id() returns uuid
    language sql stable
    as $$ select nullif(current_setting('tickq.user_id', true), '')::uuid $$;

alter table tickq.jobs enable row level security;

create policy jobs_owner on tickq.jobs to tickq_app
    using (user_id = tickq.current_user_id())
    with check (user_id = tickq.current_user_id());

-- A policy rather than BYPASSRLS: granting BYPASSRLS needs a superuser, which managed
-- databases (RDS, Supabase) do not hand out.
create policy jobs_worker on tickq.jobs to tickq_worker using (true) with check (true);

-- Applications may change a job only through the documented operations: cancel a waiting
-- job, ask a running job to cancel, or send a dead or cancelled job back to the queue.
create function tickq.jobs_app_guard() returns trigger
    language plpgsql
    as $$
begin
    if new.status = 'cancelled' and old.status in ('queued', 'retrying')
       and new.attempts = old.attempts then
        return new;
    elsif new.status = 'running' and old.status = 'running' and new.cancel_requested
       and new.attempts = old.attempts and new.run_after = old.run_after then
        return new;
    elsif new.status = 'queued' and old.status in ('dead', 'cancelled') and new.attempts = 0
       and not new.cancel_requested then
        return new;
    end if;
    raise exception 'tickq: applications may only cancel or retry jobs (% -> %)',
        old.status, new.status
        using errcode = 'insufficient_privilege';
end $$;

-- Fires only inside a user-scoped transaction, which is the only way tickq_app sees rows;
-- workers never set tickq.user_id and so pay nothing.
create trigger jobs_app_guard before update on tickq.jobs
    for each row when (coalesce(current_setting('tickq.user_id', true), '') <> '')
    execute function tickq.jobs_app_guard();
