-- Depth samples since p_since, per queue (all queues when p_queue is null).
create or replace function tickq.depth_history(p_since timestamptz, p_queue text)
    returns table (sampled_at timestamptz, queue text, depth bigint, running bigint,
                   oldest_runnable_seconds double precision)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select s.sampled_at, s.queue, s.depth, s.running, s.oldest_runnable_seconds
from tickq.queue_depth_samples s
where s.sampled_at >= p_since and (p_queue is null or s.queue = p_queue)
order by s.sampled_at, s.queue
$$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.depth_history(timestamptz, text) from public;
grant execute on function tickq.depth_history(timestamptz, text) to tickq_operator, tickq_worker;
