-- Cancel jobs of any user, as jobs_cancel does: jobs not yet running at once (with their
-- waiting descendants, tickq.jobs_settle), running ones asked to stop at their next
-- heartbeat, and a saga not running that owes undos (tickq.job_compensation_spare) made to
-- compensate first (its compensation recorded, runnable at once with attempts for its
-- undos, its workflow children cancelled now; its handler runs the undos, then it ends
-- cancelled); one compensating already is left to finish. Per requested id what happened.
create or replace function tickq.operator_cancel(p_ids uuid[], p_now timestamptz)
    returns table (id uuid, status text, outcome text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
with requested as (
    select distinct r.id from unnest(p_ids) as r (id)
), owed as materialized (
    -- Only a job that ran (claimed, or resumed) may have stored a step.
    select j.id,
           case when j.status in ('queued', 'retrying')
                     and (j.attempts > 0 or j.resumes is not null)
                then tickq.job_compensation_spare(j.id) else 0 end as spare
    from tickq.jobs j
    where j.id in (select r.id from requested r)
      and j.status in ('waiting', 'queued', 'retrying', 'running')
    -- Locked, so these columns are the row's latest: a job that suspended after this
    -- statement began is seen at rest, and compensates instead of ending without undos.
    for update of j
), cancelled as (
    update tickq.jobs j
    set status = case when j.status = 'running' or o.spare is distinct from 0 then j.status
                      else 'cancelled' end,
        cancel_requested = (j.status = 'running'),
        run_after = case when j.status <> 'running' and o.spare > 0
                         then least(j.run_after, coalesce(p_now, now())) else j.run_after end,
        max_attempts = case when j.status <> 'running' and o.spare > 0
                            then greatest(j.max_attempts, j.attempts + o.spare)
                            else j.max_attempts end,
        finished_at = case when j.status = 'running' or o.spare is distinct from 0 then null
                           else coalesce(p_now, now()) end,
        updated_at = coalesce(p_now, now())
    from owed o
    where j.id = o.id and j.status in ('waiting', 'queued', 'retrying', 'running')
    returning j.id, j.status, j.cancel_requested, j.has_children,
              j.status <> 'cancelled' and not j.cancel_requested as compensating,
              j.status <> 'cancelled' and not j.cancel_requested and o.spare > 0 as begun
), begun as (
    insert into tickq.job_step_tries (job_id, kind, name, tries, error, at)
    select c.id, 'compensation', 'cancelled', 0, 'cancelled', coalesce(p_now, now())
    from cancelled c
    where c.begun
    on conflict (job_id, kind, name) do nothing
), settled as (
    select case when count(*) > 0
                then tickq.jobs_settle(array_agg(c.id), array_agg(c.status),
                                       coalesce(p_now, now()))
           end as children
    from cancelled c
    where c.has_children and c.status = 'cancelled'
), compensating as (
    -- The workflow children of a parent that begins compensating are cancelled now.
    select case when count(*) > 0
                then tickq.job_children_cancel(
                    array_agg(c.id), array_fill('cancelled'::text, array[count(*)::integer]),
                    coalesce(p_now, now()))
           end as children
    from cancelled c
    where c.has_children and c.begun
)
select r.id,
       coalesce(c.status, j.status),
       case when c.cancel_requested then 'asked to stop'
            when c.compensating then 'compensating'
            when c.id is not null then 'cancelled'
            when j.id is null then 'not found'
            else 'not cancellable' end
from requested r
cross join settled
cross join compensating
left join cancelled c on c.id = r.id
left join tickq.jobs j on j.id = r.id
order by r.id
$$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.operator_cancel(uuid[], timestamptz) from public;
grant execute on function tickq.operator_cancel(uuid[], timestamptz) to tickq_operator, tickq_worker;
