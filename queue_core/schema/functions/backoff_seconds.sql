-- backoff(attempt) = min(base * factor^(attempt-1), max), shortened by up to `jitter`.
-- The same formula as queue_core.backoff.Backoff.delay, for retries decided in SQL.
create or replace function tickq.backoff_seconds(
    attempt integer, base double precision, factor double precision,
    max_delay double precision, jitter double precision) returns double precision
    language sql volatile parallel safe
    as $$
    select case when greatest(attempt - 1, 0) > 64 then max_delay
                else least(base * power(factor, greatest(attempt - 1, 0)), max_delay) end
           * (1 - jitter * random())
$$;
