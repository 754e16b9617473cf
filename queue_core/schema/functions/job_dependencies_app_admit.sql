-- Dependency edges an application user writes, by any statement: both ends are jobs of the
-- edge's owner (a policy cannot check it, since the ends are usually inserted by the same
-- statement as the edge and a policy's subquery does not see them; this AFTER trigger
-- does), and a parent has at most 1000 children, which bounds what one tenant's finishing
-- parent releases or cancels. Security definer: it reads the ends whoever owns them, to
-- refuse a foreign one rather than not find it.
create or replace function tickq.job_dependencies_app_admit() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_children bigint;
begin
    if (select count(*) from tickq.jobs j
        where j.id in (new.child_id, new.parent_id)
          and j.user_id is not distinct from new.user_id) <> 2 then
        raise exception 'tickq: a dependency joins only jobs of one owner'
            using errcode = 'insufficient_privilege';
    end if;
    select count(*) into v_children
    from (select 1 from tickq.job_dependencies d
          where d.parent_id = new.parent_id limit 1001) c;
    if v_children > 1000 then
        raise exception 'tickq: a job may have at most 1000 children'
            using errcode = 'TQ422', detail = 'after';
    end if;
    return null;
end $$;

-- Functions that only their triggers, maintenance or the migrator call: nobody else.
revoke all on function tickq.job_dependencies_app_admit() from public;
