-- A job's parents, then its children (dependency edges, and workflow children and the
-- parent awaiting them), each with its type and status: the graph every view of one job
-- shows. Security invoker: an application's call reads through row-level
-- security (edges join only jobs of one owner); tickq.operator_job_relatives reads any
-- job's through it.
create or replace function tickq.job_relatives(p_id uuid)
    returns table (relation text, id uuid, type text, status text)
    language sql stable
    set search_path = pg_catalog, pg_temp
    as $$
select 'parent' as relation, p.id, p.type, p.status
from tickq.job_dependencies d
join tickq.jobs p on p.id = d.parent_id
where d.child_id = p_id
union all
select 'child', c.id, c.type, c.status
from tickq.job_dependencies d
join tickq.jobs c on c.id = d.child_id
where d.parent_id = p_id
-- Workflow children (job.map, job.call) and the parent that awaits them.
union all
select 'spawned', c.id, c.type, c.status
from tickq.job_children k
join tickq.jobs c on c.id = k.child_id
where k.parent_id = p_id
union all
select 'spawned_by', p.id, p.type, p.status
from tickq.job_children k
join tickq.jobs p on p.id = k.parent_id
where k.child_id = p_id
order by relation desc, id
$$;

-- The views of one job (its durable side, its parents and children): applications read
-- their own jobs' through row-level security, workers every job's.
revoke all on function tickq.job_relatives(uuid) from public;
grant execute on function tickq.job_relatives(uuid) to tickq_app, tickq_worker;
