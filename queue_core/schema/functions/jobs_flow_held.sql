-- Per queue, type and status, the runnable jobs (due, not suspended) that only a flow key
-- keeps from starting now (held, at its cap or at its rate: tickq.flow_blocked), and the
-- age of the oldest runnable job that none keeps back: what the stats take out of the
-- depth and the oldest runnable age, so an alarm on them does not fire for work an
-- operator or a downstream asked to wait. Only groups with such jobs; none, and no read
-- of the jobs, while no flow limit or hold exists. Security definer: workers (the
-- maintenance's metrics) and operators (their counts) call it; flow_blocked is the
-- workers'.
create or replace function tickq.jobs_flow_held(p_now timestamptz)
    returns table (queue text, type text, status text, held bigint,
                   oldest_unheld_seconds double precision)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
with blocked as materialized (
    select tickq.flow_blocked(coalesce(p_now, now())) as keys
    where tickq.flow_active()
), runnable as (
    select j.queue, j.type, j.status, j.run_after,
           j.wait_kind is null and j.flow_keys && b.keys as held
    from tickq.jobs j, blocked b
    where j.status in ('queued', 'retrying') and j.run_after <= coalesce(p_now, now())
)
select r.queue, r.type, r.status, count(*) filter (where r.held),
       extract(epoch from coalesce(p_now, now())
               - min(r.run_after) filter (where not r.held))::double precision
from runnable r
group by r.queue, r.type, r.status
having bool_or(r.held)
$$;

-- Workers (the maintenance's metrics, `tickq stats`) and operators (their counts).
revoke all on function tickq.jobs_flow_held(timestamptz) from public;
grant execute on function tickq.jobs_flow_held(timestamptz) to tickq_worker, tickq_operator;
