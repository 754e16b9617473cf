-- Per queue and fairness group: jobs runnable now, running, and the oldest runnable age.
create or replace function tickq.operator_group_stats(p_now timestamptz)
    returns table (queue text, group_key text, waiting bigint, running bigint,
                   oldest_runnable_seconds double precision)
    language plpgsql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_now timestamptz := coalesce(p_now, now());
begin
    return query
    select j.queue, j.group_key::text,
           count(*) filter (where j.status in ('queued', 'retrying') and j.run_after <= v_now),
           count(*) filter (where j.status = 'running'),
           extract(epoch from v_now - min(j.run_after) filter (
               where j.status in ('queued', 'retrying') and j.run_after <= v_now))::double precision
    from tickq.jobs j
    where j.status in ('queued', 'retrying', 'running')
    group by j.queue, j.group_key
    order by j.queue, j.group_key;
end $$;

-- Operators read counts across every user.
revoke all on function tickq.operator_group_stats(timestamptz) from public;
grant execute on function tickq.operator_group_stats(timestamptz) to tickq_operator;
