-- The groups of one priority level of a queue that have runnable jobs, in group order,
-- after p_after, at most p_count of them. Each step is one descent of jobs_fair_idx (a loose
-- index scan): the cost grows with the groups returned, never with the number of jobs.
create function tickq.fair_groups(
    p_queue text, p_priority integer, p_now timestamptz, p_after text, p_count integer)
    returns text[]
    language sql stable
    as $$
    with recursive sweep (group_key, n) as (
        (select j.group_key, 1
         from tickq.jobs j
         where p_count > 0
           and j.status in ('queued', 'retrying') and j.queue = p_queue
           and j.priority = p_priority and j.group_key > p_after and j.run_after <= p_now
         order by j.group_key, j.run_after
         limit 1)
        union all
        select (select j.group_key
                from tickq.jobs j
                where j.status in ('queued', 'retrying') and j.queue = p_queue
                  and j.priority = p_priority and j.group_key > s.group_key
                  and j.run_after <= p_now
                order by j.group_key, j.run_after
                limit 1),
               s.n + 1
        from sweep s
        where s.group_key is not null and s.n < p_count
    )
    select coalesce(array_agg(group_key order by n), '{}') from sweep where group_key is not null
$$;
