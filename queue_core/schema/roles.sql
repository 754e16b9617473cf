-- The roles, made first: every later file may grant to them (a function's file grants who
-- may run it). Applied before tables.sql (queue_core/migrate.py, SCHEMA_FILES).

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
