-- What the views of one job show of its durable side: its status, how often it resumed,
-- what it waits for, how its handler ran it (the batch handler call it was last handed
-- to, whether its success committed in the handler's own transaction), the code version
-- its last run ran under (each step's too), and one JSON
-- object per completed step and per kept signal (name, time, size), never a step's result or a signal's payload. A field added to a step's or a
-- signal's object reaches every view: the owner's (GET /jobs/{id}, `tickq show`) and, through
-- tickq.operator_job_durable, the operator's. Security invoker: an application's call reads
-- through row-level security, so another user's job gives no row.
create or replace function tickq.job_durable(p_id uuid)
    returns table (status text, resumes integer, wait_kind text, wait_name text,
                   wait_until timestamptz, batch_id uuid,
                   completed_in_transaction boolean, steps jsonb, signals jsonb,
                   tries jsonb, maps jsonb, code_version text)
    language sql stable
    set search_path = pg_catalog, pg_temp
    as $$
select j.status, coalesce(j.resumes, 0), j.wait_kind, j.wait_name, j.wait_until,
       j.batch_id, coalesce(j.completed_in_transaction, false),
       (select coalesce(jsonb_agg(jsonb_build_object(
                   'name', s.name, 'finished_at', s.finished_at, 'size', s.size,
                   'code_version', s.code_version)
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
              group by k.step, k.siblings, k.max_running) k),
       j.code_version
from tickq.jobs j
where j.id = p_id
$$;

-- The views of one job (its durable side, its parents and children): applications read
-- their own jobs' through row-level security, workers every job's.
revoke all on function tickq.job_durable(uuid) from public;
grant execute on function tickq.job_durable(uuid) to tickq_app, tickq_worker;
