-- Why the current role would read past the application's row-level security, or null when
-- it would not. The API refuses to serve while this is not null.
create or replace function tickq.rls_bypass_reason() returns text
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
