-- The day partitions, oldest first, with the newest finish time they can hold (exclusive).
create or replace function tickq.jobs_day_partitions()
    returns table (name text, day date, upper_bound timestamptz)
    language sql stable
    as $$
select c.relname::text,
       to_date(substr(c.relname, 11), 'YYYYMMDD'),
       (to_date(substr(c.relname, 11), 'YYYYMMDD') + 1)::timestamp at time zone 'UTC'
from pg_inherits i
join pg_class c on c.oid = i.inhrelid
where i.inhparent = 'tickq.jobs_done'::regclass and c.relname ~ '^jobs_done_[0-9]{8}$'
order by c.relname
$$;
