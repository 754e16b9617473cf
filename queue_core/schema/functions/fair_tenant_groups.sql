-- The groups of one tenant with runnable jobs at one priority level of a queue, in group
-- order, from the first after p_after (null: from the tenant's first group), wrapping
-- around to the tenant's first groups, at most p_count of them: the tenant's own round
-- robin, so its turns go to each of its groups alike. Each step is one descent of
-- jobs_fair_idx: the cost grows with the groups returned, never with the jobs. PL/pgSQL,
-- so the two lookups are planned once per session, not once per call.
create or replace function tickq.fair_tenant_groups(
    p_queue text, p_priority integer, p_now timestamptz, p_tenant text, p_after text,
    p_count integer)
    returns text[]
    language plpgsql stable
    as $$
declare
    v_groups  text[] := '{}';
    v_key     text := p_after;
    v_next    text;
    v_wrapped boolean := p_after is null;
begin
    while cardinality(v_groups) < p_count loop
        -- Two statements, not "v_key is null or ...": a bound the index can use in each.
        if v_key is null then
            select j.group_key into v_next
            from tickq.jobs j
            where j.status in ('queued', 'retrying') and j.queue = p_queue
              and j.priority = p_priority and split_part(j.group_key, '/', 1) = p_tenant
              and j.run_after <= p_now
            order by split_part(j.group_key, '/', 1), j.group_key
            limit 1;
        else
            select j.group_key into v_next
            from tickq.jobs j
            where j.status in ('queued', 'retrying') and j.queue = p_queue
              and j.priority = p_priority and split_part(j.group_key, '/', 1) = p_tenant
              and j.group_key > v_key and j.run_after <= p_now
            order by split_part(j.group_key, '/', 1), j.group_key
            limit 1;
        end if;
        if v_next is null or (v_wrapped and p_after is not null and v_next > p_after) then
            -- Past the tenant's last group: on from its first, once.
            exit when v_wrapped;
            v_wrapped := true;
            v_key := null;
            continue;
        end if;
        v_groups := v_groups || v_next;
        v_key := v_next;
    end loop;
    return v_groups;
end $$;
