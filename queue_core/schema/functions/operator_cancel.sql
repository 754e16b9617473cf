-- Cancel jobs of any user (tickq.jobs_cancel, the one cancel, for every owner) and say per
-- requested id what happened: asked to stop (it was running), compensating (a saga that
-- owes undos runs them first, or runs them already), cancelled, not found, or not
-- cancellable (with its status).
create or replace function tickq.operator_cancel(p_ids uuid[], p_now timestamptz)
    returns table (id uuid, status text, outcome text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
with requested as (
    select distinct r.id from unnest(p_ids) as r (id)
), cancelled as materialized (
    select c.id, c.status, c.cancel_requested
    from tickq.jobs_cancel(array(select r.id from requested r), coalesce(p_now, now()), null) c
)
select r.id,
       coalesce(c.status, j.status),
       case when c.cancel_requested then 'asked to stop'
            when c.status <> 'cancelled' then 'compensating'
            when c.id is not null then 'cancelled'
            when j.id is null then 'not found'
            else 'not cancellable' end
from requested r
left join cancelled c on c.id = r.id
left join tickq.jobs j on j.id = r.id
order by r.id
$$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.operator_cancel(uuid[], timestamptz) from public;
grant execute on function tickq.operator_cancel(uuid[], timestamptz) to tickq_operator, tickq_worker;
