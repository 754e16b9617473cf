-- The first of a job's flow keys that keeps it from starting now (held, at its cap or at
-- its rate: tickq.flow_blocked), for the job views (`tickq show`, the API's GET
-- /jobs/{id}): null for a job its keys let run, or that does not wait to run. Security
-- definer, as an application may not read the holds (they name other owners' keys): so it
-- answers only of the caller's own job, as row-level security would let it read it, or of
-- any job to a worker's or an operator's login (the console's job view).
create or replace function tickq.flow_job_waits(p_job uuid) returns text
    language sql stable
    security definer
    set search_path = pg_catalog, pg_temp
    as $$
    select f.k
    from tickq.jobs j cross join unnest(j.flow_keys) with ordinality f (k, n)
    where j.id = p_job
      and j.status in ('queued', 'retrying') and j.run_after <= now()
      and (j.user_id = tickq.current_user_id()
           or (tickq.current_user_id() is null
               and (pg_has_role(session_user, 'tickq_worker', 'USAGE')
                    or pg_has_role(session_user, 'tickq_operator', 'USAGE'))))
      and f.k = any(tickq.flow_blocked(now()))
    order by f.n
    limit 1
$$;

-- What holds one's own job back: applications and workers (an application reads no flow
-- table); any job's: operators.
revoke all on function tickq.flow_job_waits(uuid) from public;
grant execute on function tickq.flow_job_waits(uuid) to tickq_app, tickq_worker, tickq_operator;
