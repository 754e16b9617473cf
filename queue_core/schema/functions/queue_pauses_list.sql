-- The paused queues, by name.
create or replace function tickq.queue_pauses_list()
    returns table (queue text, paused_by text, paused_at timestamptz, reason text)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select p.queue, p.paused_by, p.paused_at, p.reason from tickq.queue_pauses p order by p.queue
$$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.queue_pauses_list() from public;
grant execute on function tickq.queue_pauses_list() to tickq_operator, tickq_worker;
