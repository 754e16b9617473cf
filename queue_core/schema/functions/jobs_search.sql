-- A page of jobs matching the console's filters (statuses, types, queues, groups, error
-- text, creation range; null: any), newest first after the (created_at, id) cursor: the one
-- search of the store's (jobs_search, jobs_search_listed; row-level security keeps an
-- application user to its own jobs, whose owner index orders them) and of
-- tickq.operator_jobs (every user's). Security invoker, plain SQL without settings, so a
-- statement that reads it is planned as if it were written there (a null filter folds
-- away).
create or replace function tickq.jobs_search(
    p_statuses text[], p_types text[], p_queues text[], p_groups text[], p_error text,
    p_created_from timestamptz, p_created_to timestamptz,
    p_after_created timestamptz, p_after_id uuid, p_limit integer)
    returns setof tickq.jobs
    language sql stable
    as $$
select j.*
from tickq.jobs j
where (p_statuses is null or j.status = any(p_statuses))
  and (p_types is null or j.type = any(p_types))
  and (p_queues is null or j.queue = any(p_queues))
  and (p_groups is null or j.group_key = any(p_groups))
  and (p_error is null or strpos(lower(j.error), lower(p_error)) > 0)
  and (p_created_from is null or j.created_at >= p_created_from)
  and (p_created_to is null or j.created_at < p_created_to)
  and (p_after_created is null or (j.created_at, j.id) < (p_after_created, p_after_id))
order by j.created_at desc, j.id desc
limit p_limit
$$;

-- The reads that the store's statements and the operator's functions share (stats, group
-- stats, search): security invoker, so an application user's call stays under row-level
-- security; the operator's security-definer functions read every user's jobs through them.
revoke all on function tickq.jobs_search(text[], text[], text[], text[], text, timestamptz, timestamptz, timestamptz, uuid, integer) from public;
grant execute on function tickq.jobs_search(text[], text[], text[], text[], text, timestamptz, timestamptz, timestamptz, uuid, integer) to tickq_app, tickq_worker;
