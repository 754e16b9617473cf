-- The durable side of one job of any user for the operator's detail view: what its owner
-- sees of it (tickq.job_durable: step and signal names, times and sizes), never a step's
-- result or a signal's payload, which carry the user's data. No row: no such job.
create or replace function tickq.operator_job_durable(p_id uuid)
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

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.operator_job_durable(uuid) from public;
grant execute on function tickq.operator_job_durable(uuid) to tickq_operator, tickq_worker;
