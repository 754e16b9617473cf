-- Whether a time the application writes can be read back by a worker: finite, and inside the
-- years 1-9999 a Python datetime holds in any time zone (a day of margin each side). A
-- job with `-infinity` or the year 10000 would break every claim and listing that reads it.
create or replace function tickq.readable_time(p_at timestamptz) returns boolean
    language sql immutable parallel safe
    as $$
    select p_at is null
        or p_at between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'
$$;
