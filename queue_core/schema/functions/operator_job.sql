-- One job of any user for the operator's detail view: operator_jobs' columns, the error
-- history and the job's timeout, never the payload or result. Attempts count against the
-- max_attempts declared, a saga's compensation's runs apart (compensation_runs).
create or replace function tickq.operator_job(p_id uuid)
    returns table (id uuid, queue text, type text, user_id uuid, group_key text,
                   status text, attempts integer, max_attempts integer, priority integer,
                   progress jsonb, error text, errors jsonb, run_after timestamptz,
                   lease_until timestamptz, created_at timestamptz, updated_at timestamptz,
                   started_at timestamptz, finished_at timestamptz, timeout_seconds integer,
                   compensation_runs integer)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select j.id, j.queue, j.type, j.user_id, j.group_key, j.status,
       least(j.attempts, coalesce(j.compensation_attempts, j.attempts)),
       coalesce(j.declared_max_attempts, j.max_attempts),
       j.priority, j.progress, j.error, j.errors, j.run_after, j.lease_until, j.created_at,
       j.updated_at, j.started_at, j.finished_at, j.timeout_seconds,
       greatest(j.attempts - coalesce(j.compensation_attempts, j.attempts), 0)
from tickq.jobs j
where j.id = p_id
$$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.operator_job(uuid) from public;
grant execute on function tickq.operator_job(uuid) to tickq_operator, tickq_worker;
