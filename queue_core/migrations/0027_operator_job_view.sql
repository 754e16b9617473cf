-- The operator's detail of any user's job shows what its owner's does, but never the
-- payload, a step's result or a signal's payload: its durable side (step and signal names,
-- times and sizes, the wait, resumes) and its parents and children (id, type, status).
-- Each view of one job reads them through one function, tickq.job_durable and
-- tickq.job_relatives (security invoker: the owner's view under row-level security); the
-- operator's security-definer functions tickq.operator_job_durable and
-- tickq.operator_job_relatives read any job through them, so a field added to a step shows
-- in both views.

-- What the views of one job show of its durable side: its status, how often it resumed,
-- what it waits for, how its handler ran it (the batch handler call it was last handed
-- to, whether its success committed in the handler's own transaction), and one JSON
-- object per completed step and per kept signal (name, time, size), never a step's result or a signal's payload. A field added to a step's or a
-- signal's object reaches every view: the owner's (GET /jobs/{id}, `tickq show`) and, through
-- tickq.operator_job_durable, the operator's. Security invoker: an application's call reads
-- through row-level security, so another user's job gives no row.
create function tickq.job_durable(p_id uuid)
    returns table (status text, resumes integer, wait_kind text, wait_name text,
                   wait_until timestamptz, batch_id uuid,
                   completed_in_transaction boolean, steps jsonb, signals jsonb,
                   tries jsonb, maps jsonb)
    language sql stable
    set search_path = pg_catalog, pg_temp
    as $$
select j.status, coalesce(j.resumes, 0), j.wait_kind, j.wait_name, j.wait_until,
       j.batch_id, coalesce(j.completed_in_transaction, false),
       (select coalesce(jsonb_agg(jsonb_build_object(
                   'name', s.name, 'finished_at', s.finished_at, 'size', s.size)
               order by s.finished_at, s.name), '[]'::jsonb)
        from tickq.job_steps s where s.job_id = j.id),
       (select coalesce(jsonb_agg(jsonb_build_object(
                   'name', g.name, 'sent_at', g.sent_at, 'size', g.size)
               order by g.sent_at, g.name), '[]'::jsonb)
        from tickq.job_signals g where g.job_id = j.id),
       (select coalesce(jsonb_agg(jsonb_build_object(
                   'kind', t.kind, 'name', t.name, 'tries', t.tries, 'error', t.error,
                   'at', t.at, 'done_at', t.done_at)
               order by t.at, t.kind, t.name), '[]'::jsonb)
        from tickq.job_step_tries t where t.job_id = j.id),
       (select coalesce(jsonb_agg(jsonb_build_object(
                   'step', k.step, 'children', k.siblings, 'max_running', k.max_running,
                   'ended', k.ended) order by k.step), '[]'::jsonb)
        from (select k.step, k.siblings, k.max_running,
                     count(*) filter (where c.status in ('succeeded', 'dead', 'cancelled'))
                         as ended
              from tickq.job_children k join tickq.jobs c on c.id = k.child_id
              where k.parent_id = j.id
              group by k.step, k.siblings, k.max_running) k)
from tickq.jobs j
where j.id = p_id
$$;

-- A job's parents, then its children, each with its type and status: the graph every view
-- of one job shows. Security invoker: an application's call reads through row-level
-- security (edges join only jobs of one owner); tickq.operator_job_relatives reads any
-- job's through it.
create function tickq.job_relatives(p_id uuid)
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

-- The durable side of one job of any user for the operator's detail view: what its owner
-- sees of it (tickq.job_durable: step and signal names, times and sizes), never a step's
-- result or a signal's payload, which carry the user's data. No row: no such job.
create function tickq.operator_job_durable(p_id uuid)
    returns table (status text, resumes integer, wait_kind text, wait_name text,
                   wait_until timestamptz, batch_id uuid,
                   completed_in_transaction boolean, steps jsonb, signals jsonb,
                   tries jsonb, maps jsonb)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select d.status, d.resumes, d.wait_kind, d.wait_name, d.wait_until, d.batch_id,
       d.completed_in_transaction, d.steps, d.signals, d.tries, d.maps
from tickq.job_durable(p_id) d
$$;

-- The parents and children of one job of any user for the operator's detail view, each
-- with its id, type and status only (tickq.job_relatives), never a payload or result.
create function tickq.operator_job_relatives(p_id uuid)
    returns table (relation text, id uuid, type text, status text)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select r.relation, r.id, r.type, r.status
from tickq.job_relatives(p_id) r
$$;

revoke all on function tickq.job_durable(uuid), tickq.job_relatives(uuid) from public;
grant execute on function tickq.job_durable(uuid), tickq.job_relatives(uuid)
    to tickq_app, tickq_worker;

revoke all on function tickq.operator_job_durable(uuid), tickq.operator_job_relatives(uuid)
    from public;
grant execute on function tickq.operator_job_durable(uuid), tickq.operator_job_relatives(uuid)
    to tickq_operator, tickq_worker;
