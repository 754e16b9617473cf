-- Pause a queue; pausing a paused queue keeps who paused it first and when.
create or replace function tickq.queue_pause(p_queue text, p_by text, p_reason text, p_now timestamptz)
    returns table (queue text, paused_by text, paused_at timestamptz, reason text)
    language sql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
insert into tickq.queue_pauses as p (queue, paused_by, paused_at, reason)
values (p_queue, p_by, coalesce(p_now, now()), p_reason)
on conflict on constraint queue_pauses_pkey do update set queue = p.queue
returning p.queue, p.paused_by, p.paused_at, p.reason
$$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.queue_pause(text, text, text, timestamptz) from public;
grant execute on function tickq.queue_pause(text, text, text, timestamptz) to tickq_operator, tickq_worker;
