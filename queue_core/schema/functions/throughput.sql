-- Succeeded, failed (and retried) and dead per bucket of p_bucket_seconds since p_since.
-- Succeeded and dead come from jobs_finished_idx; failures from the error history of jobs
-- that failed: finished ones through jobs_failed_finished_idx, retrying ones through
-- jobs_retrying_idx, running ones through jobs_lease_idx. A dead job's last failure counts
-- as dead, not as retried.
create or replace function tickq.throughput(
    p_since timestamptz, p_bucket_seconds integer, p_queue text, p_now timestamptz)
    returns table (bucket timestamptz, succeeded bigint, failed bigint, dead bigint)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
with buckets as (
    select b as bucket
    from generate_series(
        to_timestamp(floor(extract(epoch from p_since) / p_bucket_seconds) * p_bucket_seconds),
        coalesce(p_now, now()), make_interval(secs => p_bucket_seconds)) b
), finished as (
    select j.status, j.finished_at as at
    from tickq.jobs j
    where j.status in ('succeeded', 'dead') and j.finished_at >= p_since
      and (p_queue is null or j.queue = p_queue)
), failing as (
    select j.status, j.errors from tickq.jobs j
    where j.status in ('succeeded', 'dead', 'cancelled') and j.errors <> '[]'::jsonb
      and j.finished_at >= p_since and (p_queue is null or j.queue = p_queue)
    union all
    select j.status, j.errors from tickq.jobs j
    where j.status = 'retrying' and j.updated_at >= p_since
      and (p_queue is null or j.queue = p_queue)
    union all
    select j.status, j.errors from tickq.jobs j
    where j.status = 'running' and j.lease_until > '-infinity' and j.errors <> '[]'::jsonb
      and (p_queue is null or j.queue = p_queue)
), failures as (
    select (e.entry ->> 'at')::timestamptz as at
    from failing f, jsonb_array_elements(f.errors) with ordinality as e (entry, n)
    where not (f.status = 'dead' and e.n = jsonb_array_length(f.errors))
), events as (
    select status, at from finished
    union all
    select 'failed', at from failures where at >= p_since
)
select b.bucket,
       count(*) filter (where e.status = 'succeeded'),
       count(*) filter (where e.status = 'failed'),
       count(*) filter (where e.status = 'dead')
from buckets b
left join events e
    on e.at >= b.bucket and e.at < b.bucket + make_interval(secs => p_bucket_seconds)
group by b.bucket
order by b.bucket
$$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.throughput(timestamptz, integer, text, timestamptz) from public;
grant execute on function tickq.throughput(timestamptz, integer, text, timestamptz) to tickq_operator, tickq_worker;
