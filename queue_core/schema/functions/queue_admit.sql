-- Backpressure for enqueue: lock the limit rows of the given queues (so concurrent enqueuers
-- of one limited queue take turns), then return those that the incoming jobs would overflow.
-- Security definer: depth counts every waiting job, including rows that row-level security
-- hides from the enqueuing application user. Waiting means queued, retrying, or waiting for
-- parents (which become queued without asking). A queue limited per owner only (no
-- max_depth) is never full here: owners' caps bind application users (jobs_app_admit).
create or replace function tickq.queue_admit(p_queues text[], p_counts integer[])
    returns table (queue text, depth bigint, max_depth integer)
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_limits record;
begin
    for v_limits in
        select l.queue, l.max_depth
        from tickq.queue_limits l
        where l.queue = any(p_queues) and l.max_depth is not null
        order by l.queue
        for update
    loop
        queue := v_limits.queue;
        max_depth := v_limits.max_depth;
        -- Counted after the lock: a fresh snapshot that includes the previous holder's jobs.
        -- Bounded by max_depth + 1 rows of jobs_claim_idx and of jobs_waiting_idx, however
        -- deep the queue is.
        select (select count(*)
                from (select 1 from tickq.jobs j
                      where j.queue = v_limits.queue and j.status in ('queued', 'retrying')
                      limit v_limits.max_depth + 1) r)
             + (select count(*)
                from (select 1 from tickq.jobs j
                      where j.queue = v_limits.queue and j.status = 'waiting'
                      limit v_limits.max_depth + 1) w)
        into depth;
        if depth + (select sum(c.n) from unnest(p_queues, p_counts) c (q, n)
                    where c.q = v_limits.queue) > v_limits.max_depth then
            return next;
        end if;
    end loop;
end $$;

-- Workers make and drop day partitions and check queue depth before they enqueue
-- (applications are admitted by the trigger jobs_app_admit instead).
revoke all on function tickq.queue_admit(text[], integer[]) from public;
grant execute on function tickq.queue_admit(text[], integer[]) to tickq_worker;
