-- The parents and children of one job of any user for the operator's detail view, each
-- with its id, type and status only (tickq.job_relatives), never a payload or result.
create or replace function tickq.operator_job_relatives(p_id uuid)
    returns table (relation text, id uuid, type text, status text)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select r.relation, r.id, r.type, r.status
from tickq.job_relatives(p_id) r
$$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.operator_job_relatives(uuid) from public;
grant execute on function tickq.operator_job_relatives(uuid) to tickq_operator, tickq_worker;
