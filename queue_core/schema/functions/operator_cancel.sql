-- Cancel jobs of any user, as jobs_cancel does: jobs not yet running at once (with their
-- waiting descendants, tickq.jobs_settle), running ones asked to stop at their next
-- heartbeat; per requested id what happened.
create function tickq.operator_cancel(p_ids uuid[], p_now timestamptz)
    returns table (id uuid, status text, outcome text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
with requested as (
    select distinct r.id from unnest(p_ids) as r (id)
), cancelled as (
    update tickq.jobs j
    set status = case when j.status = 'running' then j.status else 'cancelled' end,
        cancel_requested = (j.status = 'running'),
        finished_at = case when j.status = 'running' then null
                           else coalesce(p_now, now()) end,
        updated_at = coalesce(p_now, now())
    where j.id in (select r.id from requested r)
      and j.status in ('waiting', 'queued', 'retrying', 'running')
    returning j.id, j.status, j.cancel_requested, j.has_children
), settled as (
    select case when count(*) > 0
                then tickq.jobs_settle(array_agg(c.id), array_agg(c.status),
                                       coalesce(p_now, now()))
           end as children
    from cancelled c
    where c.has_children and c.status = 'cancelled'
)
select r.id,
       coalesce(c.status, j.status),
       case when c.cancel_requested then 'asked to stop'
            when c.id is not null then 'cancelled'
            when j.id is null then 'not found'
            else 'not cancellable' end
from requested r
cross join settled
left join cancelled c on c.id = r.id
left join tickq.jobs j on j.id = r.id
order by r.id
$$;
