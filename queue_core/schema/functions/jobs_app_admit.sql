-- Admission for application users: checked by the insert itself, so the application role
-- no longer calls tickq.queue_admit (which told it every user's queue depth and let it
-- hold the limit lock at will). After the statement's rows are in, under the limit row's
-- lock, the waiting jobs are counted with a fresh snapshot, the new ones included.
create function tickq.jobs_app_admit() returns trigger
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    v_max   integer;
    v_depth bigint;
begin
    select l.max_depth into v_max
    from tickq.queue_limits l where l.queue = new.queue
    for update;
    if v_max is not null then
        select count(*) into v_depth
        from (select 1 from tickq.jobs j
              where j.queue = new.queue and j.status in ('queued', 'retrying')
              limit v_max + 1) w;
        if v_depth > v_max then
            raise exception 'tickq: queue % is full', new.queue
                using errcode = 'TQ429', detail = new.queue, hint = v_max::text;
        end if;
    end if;
    return null;
end $$;
