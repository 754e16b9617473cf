-- Backpressure for a map step's children, which a worker enqueues for the parent's owner: an
-- owner's cap in the queue (max_depth_per_owner) binds them as it binds the owner's own
-- enqueues (jobs_app_admit), since the handler may map over a list the owner sized. Locks
-- the queue's limit row (so concurrent enqueuers of one limited queue take turns), then
-- counts the owner's live jobs in it (waiting, queued, running, retrying: the parent's own
-- row among them) with a fresh snapshot that includes the previous holder's jobs, bounded by
-- the cap + 1 rows however many the owner has. Returns the queue, that count and the cap when
-- the p_count incoming jobs would pass it; no row otherwise, or when the queue caps no owner.
-- Security definer: the count includes rows that row-level security would hide.
create or replace function tickq.queue_admit_owner(p_queue text, p_owner uuid, p_count integer)
    returns table (queue text, depth bigint, max_depth integer)
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_cap integer;
begin
    if p_owner is null then
        return;
    end if;
    select l.max_depth_per_owner into v_cap
    from tickq.queue_limits l
    where l.queue = p_queue and l.max_depth_per_owner is not null
    for update;
    if v_cap is null then
        return;
    end if;
    select count(*) into depth
    from (select 1 from tickq.jobs j
          where j.user_id = p_owner and j.queue = p_queue
            and j.status in ('waiting', 'queued', 'running', 'retrying')
          limit v_cap + 1) o;
    if depth + p_count > v_cap then
        queue := p_queue;
        max_depth := v_cap;
        return next;
    end if;
end $$;

-- Workers make and drop day partitions and check queue depth before they enqueue
-- (applications are admitted by the trigger jobs_app_admit instead).
revoke all on function tickq.queue_admit_owner(text, uuid, integer) from public;
grant execute on function tickq.queue_admit_owner(text, uuid, integer) to tickq_worker;
