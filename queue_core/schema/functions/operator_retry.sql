-- Send dead or cancelled jobs of any user back to the queue (tickq.jobs_retry by id, the one
-- retry, for every owner) and say per requested id what happened: retried, not found, not
-- retryable (with its status), parents unfinished (a parent has not succeeded, so it must
-- not run yet), or key taken (a live job holds its idempotency key, which the key table
-- says).
create or replace function tickq.operator_retry(p_ids uuid[], p_now timestamptz)
    returns table (id uuid, status text, outcome text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
with requested as (
    select distinct r.id from unnest(p_ids) as r (id)
), retried as materialized (
    select t.id, t.status
    from tickq.jobs_retry(array['dead', 'cancelled'], array(select r.id from requested r),
                          null, null, null, coalesce(p_now, now()), null) t
)
select r.id,
       coalesce(t.status, j.status),
       case when t.id is not null then 'retried'
            when j.id is null then 'not found'
            when j.status not in ('dead', 'cancelled') then 'not retryable'
            when exists (select from tickq.job_dependencies d
                         join tickq.jobs p on p.id = d.parent_id
                         where d.child_id = r.id and p.status <> 'succeeded')
                then 'parents unfinished'
            else 'key taken' end
from requested r
left join retried t on t.id = r.id
left join tickq.jobs j on j.id = r.id
order by r.id
$$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.operator_retry(uuid[], timestamptz) from public;
grant execute on function tickq.operator_retry(uuid[], timestamptz) to tickq_operator, tickq_worker;
