-- Code versions and safe deploys: each durable run records the code version it ran under
-- on its job (its last run's) and on each step it stores, which the views of one job show;
-- job.patched(name) leaves a 'patch' marker among the job's step tries; `tickq deploy
-- check` and TICKQ_PIN_VERSION read them.

alter table tickq.jobs add column code_version text;
alter table tickq.jobs add constraint jobs_code_version_check check (
    char_length(code_version) <= 200);

alter table tickq.job_steps add column code_version text;
alter table tickq.job_steps add constraint job_steps_code_version_check check (
    char_length(code_version) <= 200);

alter table tickq.job_step_tries drop constraint job_step_tries_kind_check;
alter table tickq.job_step_tries add constraint job_step_tries_kind_check check (
    kind in ('step', 'undo', 'compensation', 'patch'));

-- The views of one job gain a column: a function's result type changes only by dropping it.
drop function tickq.operator_job_durable(uuid);
drop function tickq.job_durable(uuid);

-- What the views of one job show of its durable side: its status, how often it resumed,
-- what it waits for, how its handler ran it (the batch handler call it was last handed
-- to, whether its success committed in the handler's own transaction), the code version
-- its last run ran under (each step's too), and one JSON
-- object per completed step and per kept signal (name, time, size), never a step's result or a signal's payload. A field added to a step's or a
-- signal's object reaches every view: the owner's (GET /jobs/{id}, `tickq show`) and, through
-- tickq.operator_job_durable, the operator's. Security invoker: an application's call reads
-- through row-level security, so another user's job gives no row.
create function tickq.job_durable(p_id uuid)
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

-- The durable side of one job of any user for the operator's detail view: what its owner
-- sees of it (tickq.job_durable: step and signal names, times and sizes), never a step's
-- result or a signal's payload, which carry the user's data. No row: no such job.
create function tickq.operator_job_durable(p_id uuid)
    returns table (status text, resumes integer, wait_kind text, wait_name text,
                   wait_until timestamptz, batch_id uuid,
                   completed_in_transaction boolean, steps jsonb, signals jsonb,
                   tries jsonb, maps jsonb, code_version text)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select d.status, d.resumes, d.wait_kind, d.wait_name, d.wait_until, d.batch_id,
       d.completed_in_transaction, d.steps, d.signals, d.tries, d.maps, d.code_version
from tickq.job_durable(p_id) d
$$;

revoke all on function tickq.job_durable(uuid) from public;
grant execute on function tickq.job_durable(uuid) to tickq_app, tickq_worker;
revoke all on function tickq.operator_job_durable(uuid) from public;
grant execute on function tickq.operator_job_durable(uuid) to tickq_operator, tickq_worker;
