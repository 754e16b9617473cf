-- The API's login can never read past row-level security, whatever login a deployment gives
-- it, and operators read cross-user counts through one narrow function, not the worker role.

-- Row-level security binds the table's owner too. One master login for migrations, workers
-- and the API is common on small managed databases, and an owner that RLS skipped would
-- read every user's jobs through the API.
alter table tickq.jobs force row level security;

-- The owner keeps every row: workers and migrations that log in as the owner, and the
-- security-definer functions below (which run as the owner), work as before.
do $$
begin
    execute format(
        'create policy jobs_table_owner on tickq.jobs to %I using (true) with check (true)',
        (select r.rolname from pg_class c join pg_roles r on r.oid = c.relowner
         where c.oid = 'tickq.jobs'::regclass));
end $$;

-- The migrating login (usually the owner) may act as tickq_app, so an API pointed at the
-- migrations' secret can still drop to the application role. Skipped where this login may
-- not grant roles; the API then refuses to serve on it rather than leak.
do $$
begin
    if not pg_has_role(current_user, 'tickq_app', 'MEMBER') then
        execute format('grant tickq_app to %I', current_user);
    end if;
exception when insufficient_privilege or invalid_grant_operation then
    raise notice 'tickq: % may not act as tickq_app; grant it to the API login', current_user;
end $$;

-- Act as tickq_app until this transaction ends, when this login may; true if it did.
-- Per transaction (SET LOCAL), never per session, so a transaction-mode pooler (RDS Proxy,
-- PgBouncer) cannot hand the role to another client's transaction. No SET clause: it
-- would undo the role change when the function returns.
create function tickq.act_as_app() returns boolean
    language plpgsql volatile
    as $$
begin
    perform pg_catalog.set_config('role', 'tickq_app', true);
    return true;
exception when insufficient_privilege then
    return false;
end $$;

-- Why the current role would read past the application's row-level security, or null when
-- it would not. The API refuses to serve while this is not null.
create function tickq.rls_bypass_reason() returns text
    language sql stable
    as $$
select case
    when r.rolsuper then 'is a superuser'
    when r.rolbypassrls then 'has BYPASSRLS'
    when pg_catalog.pg_has_role(current_user, c.relowner, 'USAGE') then 'owns tickq.jobs'
    when pg_catalog.pg_has_role(current_user, 'tickq_worker', 'USAGE')
        then 'has the privileges of tickq_worker'
end
from pg_catalog.pg_roles r, pg_catalog.pg_class c
where r.rolname = current_user and c.oid = 'tickq.jobs'::regclass
$$;

-- Operators: counts across every user, nothing else. A login in tickq_operator (the API's,
-- so /admin/stats works) can call this one function and touch no row.
do $$
begin
    if not exists (select from pg_roles where rolname = 'tickq_operator') then
        create role tickq_operator nologin;
    end if;
exception when duplicate_object or unique_violation then
    null;  -- another database on this cluster created it at the same moment
end $$;

create function tickq.operator_stats(p_now timestamptz)
    returns table (queue text, type text, status text, count bigint,
                   oldest_runnable_seconds double precision)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select j.queue, j.type, j.status, count(*),
       extract(epoch from coalesce(p_now, now())
               - min(j.run_after) filter (
                   where j.status in ('queued', 'retrying')
                     and j.run_after <= coalesce(p_now, now())))::double precision
from tickq.jobs j
group by j.queue, j.type, j.status
order by j.queue, j.type, j.status
$$;

-- Per queue and fairness group (group_key, added by migration 0010): jobs runnable now,
-- running, and the oldest runnable age. PL/pgSQL, whose body is checked when called, so
-- this can be created before the column exists.
create function tickq.operator_group_stats(p_now timestamptz)
    returns table (queue text, group_key text, waiting bigint, running bigint,
                   oldest_runnable_seconds double precision)
    language plpgsql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_now timestamptz := coalesce(p_now, now());
begin
    return query
    select j.queue, j.group_key::text,
           count(*) filter (where j.status in ('queued', 'retrying') and j.run_after <= v_now),
           count(*) filter (where j.status = 'running'),
           extract(epoch from v_now - min(j.run_after) filter (
               where j.status in ('queued', 'retrying') and j.run_after <= v_now))::double precision
    from tickq.jobs j
    where j.status in ('queued', 'retrying', 'running')
    group by j.queue, j.group_key
    order by j.queue, j.group_key;
end $$;

revoke all on function tickq.operator_stats(timestamptz) from public;
revoke all on function tickq.operator_group_stats(timestamptz) from public;
grant usage on schema tickq to tickq_operator;
grant execute on function tickq.operator_stats(timestamptz),
    tickq.operator_group_stats(timestamptz) to tickq_operator;

-- Admission for application users: checked by the insert itself, so the application role
-- no longer calls tickq.queue_admit (which told it every user's queue depth and let it
-- hold the limit lock at will). After the statement's rows are in, under the limit row's
-- lock, the waiting jobs are counted with a fresh snapshot, the new ones included.
create function tickq.jobs_app_admit() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_max   integer;
    v_depth bigint;
begin
    select l.max_depth into v_max
    from tickq.queue_limits l where l.queue = new.queue
    for update;
    if v_max is not null then
        select count(*) into v_depth
        from (select 1 from tickq.jobs j
              where j.queue = new.queue and j.status in ('queued', 'retrying')
              limit v_max + 1) w;
        if v_depth > v_max then
            raise exception 'tickq: queue % is full', new.queue
                using errcode = 'TQ429', detail = new.queue, hint = v_max::text;
        end if;
    end if;
    return null;
end $$;

-- Only application users' rows (tickq.user_id set for the transaction): a worker's insert
-- evaluates the condition and queues nothing, and keeps its explicit admission. A row
-- trigger, not a statement one with a transition table, which would copy every inserted
-- row of every enqueue.
create trigger jobs_app_admit after insert on tickq.jobs
    for each row
    when (coalesce(current_setting('tickq.user_id', true), '') <> '')
    execute function tickq.jobs_app_admit();

revoke execute on function tickq.queue_admit(text[], integer[]) from tickq_app;
