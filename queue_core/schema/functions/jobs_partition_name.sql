-- The name of the day partition of finished jobs for one UTC day: jobs_done_YYYYMMDD.
create or replace function tickq.jobs_partition_name(p_day date) returns text
    language sql immutable
    as $$ select 'jobs_done_' || to_char(p_day, 'YYYYMMDD') $$;
