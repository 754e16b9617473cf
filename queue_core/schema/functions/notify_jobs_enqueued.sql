-- Wake long-running workers when jobs arrive. One notification per insert statement (not
-- per row), so a bulk enqueue of thousands costs one; PostgreSQL also folds identical
-- notifications of one transaction into one. Only `tickq work` listens: Lambda ticks never
-- LISTEN (RDS Proxy would pin their connections), they are driven by their schedule.
create or replace function tickq.notify_jobs_enqueued() returns trigger
    language plpgsql
    as $$
begin
    perform pg_notify('tickq_jobs', '');
    return null;
end
$$;
