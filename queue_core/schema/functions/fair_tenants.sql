-- The tenants of one priority level of a queue that have runnable jobs, in tenant order,
-- after p_after, at most p_count of them. A job's tenant is its group key up to the first
-- '/' (the whole key when it has none): the HTTP API's groups are "<caller>/<group>", so a
-- caller's groups are all one tenant. Each step is one descent of jobs_fair_idx (a loose
-- index scan): the cost grows with the tenants returned, never with their groups or jobs.
create or replace function tickq.fair_tenants(
    p_queue text, p_priority integer, p_now timestamptz, p_after text, p_count integer)
    returns text[]
    language sql stable
    as $$
    with recursive sweep (tenant, n) as (
        (select split_part(j.group_key, '/', 1), 1
         from tickq.jobs j
         where p_count > 0
           and j.status in ('queued', 'retrying') and j.queue = p_queue
           and j.priority = p_priority and split_part(j.group_key, '/', 1) > p_after
           and j.run_after <= p_now
         order by split_part(j.group_key, '/', 1), j.group_key
         limit 1)
        union all
        select (select split_part(j.group_key, '/', 1)
                from tickq.jobs j
                where j.status in ('queued', 'retrying') and j.queue = p_queue
                  and j.priority = p_priority and split_part(j.group_key, '/', 1) > s.tenant
                  and j.run_after <= p_now
                order by split_part(j.group_key, '/', 1), j.group_key
                limit 1),
               s.n + 1
        from sweep s
        where s.tenant is not null and s.n < p_count
    )
    select coalesce(array_agg(tenant order by n), '{}') from sweep where tenant is not null
$$;
