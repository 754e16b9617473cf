-- Send dead or cancelled jobs of any user back to the queue, as jobs_retry does by id, and
-- say per requested id what happened: retried, not found, not retryable (with its status),
-- parents unfinished (a parent has not succeeded, so it must not run yet), or key taken (a
-- live job holds its idempotency key, which the key table says).
create or replace function tickq.operator_retry(p_ids uuid[], p_now timestamptz)
    returns table (id uuid, status text, outcome text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
with requested as (
    select distinct r.id from unnest(p_ids) as r (id)
), candidates as (
    select j.id, j.idempotency_key, j.user_id, j.finished_at
    from tickq.jobs j
    where j.id in (select r.id from requested r) and j.status in ('dead', 'cancelled')
    for update skip locked
), blocked as (
    select c.id from candidates c
    where exists (select from tickq.job_dependencies d
                  join tickq.jobs p on p.id = d.parent_id
                  where d.child_id = c.id and p.status <> 'succeeded')
), chosen as (
    select c.id from candidates c
    where c.id not in (select b.id from blocked b)
      and (c.idempotency_key is null
       or (not exists (select from tickq.job_keys k
                       where k.idempotency_key = c.idempotency_key
                         and k.user_id is not distinct from c.user_id)
           and not exists (select from candidates n
                           where n.idempotency_key = c.idempotency_key
                             and n.user_id is not distinct from c.user_id
                             and (n.finished_at, n.id) > (c.finished_at, c.id))))
), retried as (
    update tickq.jobs j
    set status = 'queued',
        attempts = 0,
        run_after = coalesce(p_now, now()),
        cancel_requested = false,
        finished_at = null,
        updated_at = coalesce(p_now, now())
    from chosen
    where j.id = chosen.id
    returning j.id, j.status
)
select r.id,
       coalesce(t.status, j.status),
       case when t.id is not null then 'retried'
            when j.id is null then 'not found'
            when j.status not in ('dead', 'cancelled') then 'not retryable'
            when b.id is not null then 'parents unfinished'
            else 'key taken' end
from requested r
left join retried t on t.id = r.id
left join blocked b on b.id = r.id
left join tickq.jobs j on j.id = r.id
order by r.id
$$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.operator_retry(uuid[], timestamptz) from public;
grant execute on function tickq.operator_retry(uuid[], timestamptz) to tickq_operator, tickq_worker;
