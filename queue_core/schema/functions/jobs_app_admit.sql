-- Admission for application users: checked by the insert itself (and by a retry, whose row
-- moves back into the live partition as an insert), so every insert path of the
-- application role is bounded, the API's and plain SQL alike, and the application role
-- never calls tickq.queue_admit (which told it every user's queue depth and let it hold the
-- limit lock at will). The bounds:
-- * every time written is one a worker can read back (tickq.readable_time), and run_after
--   is at most 366 days ahead, as the API's `delay` is;
-- * under the queue limit row's lock, counted with a fresh snapshot that includes the new
--   rows: at most max_depth jobs waiting to run in the queue (queued, retrying, and waiting
--   for parents, which become queued without asking), and at most max_depth_per_owner live
--   jobs of this owner in it.
-- A refusal raises, so the statement writes nothing. Rows that land finished (a cancel moved
-- into the finished partitions) are no admission.
create or replace function tickq.jobs_app_admit() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_max   integer;
    v_owner integer;
    v_depth bigint;
begin
    -- A job that a cancel moves into the finished partitions is no admission.
    if new.status not in ('queued', 'waiting') then
        return null;
    end if;
    if not (tickq.readable_time(new.run_after) and tickq.readable_time(new.created_at)
            and tickq.readable_time(new.updated_at)) then
        raise exception 'tickq: a job''s times must be finite dates of the years 1-9999'
            using errcode = 'TQ422', detail = 'run_after';
    end if;
    if new.run_after > now() + interval '366 days' then
        raise exception 'tickq: run_after may be at most 366 days ahead'
            using errcode = 'TQ422', detail = 'run_after';
    end if;
    select l.max_depth, l.max_depth_per_owner into v_max, v_owner
    from tickq.queue_limits l where l.queue = new.queue
    for update;
    if v_max is not null then
        select (select count(*)
                from (select 1 from tickq.jobs j
                      where j.queue = new.queue and j.status in ('queued', 'retrying')
                      limit v_max + 1) r)
             + (select count(*)
                from (select 1 from tickq.jobs j
                      where j.queue = new.queue and j.status = 'waiting'
                      limit v_max + 1) w)
        into v_depth;
        if v_depth > v_max then
            raise exception 'tickq: queue % is full', new.queue
                using errcode = 'TQ429', detail = new.queue, hint = v_max::text;
        end if;
    end if;
    if v_owner is not null then
        select count(*) into v_depth
        from (select 1 from tickq.jobs j
              where j.user_id = new.user_id and j.queue = new.queue
                and j.status in ('waiting', 'queued', 'running', 'retrying')
              limit v_owner + 1) o;
        if v_depth > v_owner then
            raise exception 'tickq: queue % is full for this owner', new.queue
                using errcode = 'TQ429', detail = new.queue, hint = v_owner::text;
        end if;
    end if;
    return null;
end $$;
