-- Every user's jobs for the operator list (tickq.jobs_search, the store's search, read
-- with the owner's rights): what identifies a job and how it went, never its payload or
-- result. Newest first, a page after the (created_at, id) cursor. As every
-- list of jobs, it leaves out a large progress (null, tickq.list_left_out) and cuts the
-- error to its first 200 characters (LIST_ERROR_CHARS in queue_core/model/pages.py); `truncated`
-- names what it left out or cut, each with the bytes it holds ({} when nothing). The page's
-- rows are chosen first, so only they are measured. `wait_kind`: what a suspended job
-- (queued with a wait) waits for, so the list shows it suspended. Attempts count against the
-- max_attempts declared, a saga's compensation's runs apart (compensation_runs).
create or replace function tickq.operator_jobs(
    p_statuses text[], p_types text[], p_queues text[], p_groups text[], p_error text,
    p_created_from timestamptz, p_created_to timestamptz,
    p_after_created timestamptz, p_after_id uuid, p_limit integer)
    returns table (id uuid, queue text, type text, user_id uuid, group_key text, status text,
                   attempts integer, max_attempts integer, priority integer,
                   progress jsonb, error text, run_after timestamptz,
                   created_at timestamptz, updated_at timestamptz, finished_at timestamptz,
                   truncated jsonb, wait_kind text, compensation_runs integer)
    language sql stable security definer
    set search_path = pg_catalog, pg_temp
    as $$
select j.id, j.queue, j.type, j.user_id, j.group_key, j.status,
       least(j.attempts, coalesce(j.compensation_attempts, j.attempts)),
       coalesce(j.declared_max_attempts, j.max_attempts), j.priority,
       case when b.progress is null then j.progress end, left(j.error, 200),
       j.run_after, j.created_at, j.updated_at, j.finished_at,
       jsonb_strip_nulls(jsonb_build_object('progress', b.progress, 'error', b.error)),
       j.wait_kind, greatest(j.attempts - coalesce(j.compensation_attempts, j.attempts), 0)
from tickq.jobs_search(p_statuses, p_types, p_queues, p_groups, p_error, p_created_from,
                       p_created_to, p_after_created, p_after_id, p_limit) j
cross join lateral (
    select tickq.list_left_out(j.progress) as progress,
           case when char_length(j.error) > 200 then octet_length(j.error) end as error) b
order by j.created_at desc, j.id desc
$$;

-- The operator console's functions: operators and workers (the CLI) call them.
revoke all on function tickq.operator_jobs(text[], text[], text[], text[], text, timestamptz, timestamptz, timestamptz, uuid, integer) from public;
grant execute on function tickq.operator_jobs(text[], text[], text[], text[], text, timestamptz, timestamptz, timestamptz, uuid, integer) to tickq_operator, tickq_worker;
