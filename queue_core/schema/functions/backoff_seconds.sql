-- backoff(attempt) = min(base * factor^(attempt-1), max), shortened by up to `jitter`.
-- The same formula as queue_core.model.backoff.Backoff.delay, for retries decided in SQL. A delay
-- under a microsecond is none, and a jitter under a billionth none: float8 arithmetic raises
-- on underflow (a subnormal base or jitter times random() rounds to zero), and a row must
-- not stop the reclaim with an error (backoff_base 1e-9 and jitter 5e-324 did).
create or replace function tickq.backoff_seconds(
    attempt integer, base double precision, factor double precision,
    max_delay double precision, jitter double precision) returns double precision
    language sql volatile parallel safe
    as $$
    select case when delay < 1e-6 then 0
                else delay * (1 - case when jitter < 1e-9 then 0 else jitter * random() end) end
    from (select case when greatest(attempt - 1, 0) > 64 then max_delay
                      else least(base * power(factor, greatest(attempt - 1, 0)), max_delay) end
                 as delay) as capped
$$;
