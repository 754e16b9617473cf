-- The debounce or throttle that made one job of any user, for the operator's detail view
-- (debounced N times): its kind and count, never its key, which is the user's own text.
create or replace function tickq.operator_job_gate(p_id uuid)
    returns table (kind text, enqueues integer)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select g.kind, g.enqueues from tickq.job_gates g where g.job_id = p_id
$$;

-- Who may run it (docs/threat-model.md).
revoke all on function tickq.operator_job_gate(uuid) from public;
grant execute on function tickq.operator_job_gate(uuid) to tickq_operator, tickq_worker;
