-- Row-level security binds the owner of the dependency edges too, as migrations 0007 and
-- 0008 do for tickq.jobs and the step tables: an API pointed at the owner's login must not
-- read another user's edges. The owner keeps every row, so workers, migrations and the
-- security-definer functions that run as the owner work as before.
alter table tickq.job_dependencies force row level security;
do $$
begin
    execute format(
        'create policy job_dependencies_table_owner on tickq.job_dependencies to %I'
        ' using (true) with check (true)',
        (select r.rolname from pg_class c join pg_roles r on r.oid = c.relowner
         where c.oid = 'tickq.job_dependencies'::regclass));
end $$;
