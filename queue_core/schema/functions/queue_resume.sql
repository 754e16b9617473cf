-- Resume a queue; no row when it was not paused.
create or replace function tickq.queue_resume(p_queue text)
    returns table (queue text, paused_by text, paused_at timestamptz, reason text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
delete from tickq.queue_pauses p where p.queue = p_queue
returning p.queue, p.paused_by, p.paused_at, p.reason
$$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.queue_resume(text) from public;
grant execute on function tickq.queue_resume(text) to tickq_operator, tickq_worker;
